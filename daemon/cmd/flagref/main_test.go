package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/daemon"
)

// flagReference is the generated flag reference, from this directory.
const flagReference = "../../../docs/flags.md"

// TestFlagReference checks that docs/flags.md is write's output; UPDATE_DOCS=1 (`make docs`) rewrites it.
func TestFlagReference(t *testing.T) {
	var want bytes.Buffer
	if err := write(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(flagReference)
	if err == nil && bytes.Equal(got, want.Bytes()) {
		return
	}
	if os.Getenv("UPDATE_DOCS") == "1" {
		if err := os.MkdirAll(filepath.Dir(flagReference), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(flagReference, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/flags.md")
		return
	}
	if err == nil {
		err = firstDiff(string(got), want.String())
	}
	t.Errorf("docs/flags.md is not the generated flag reference (%v): run `make docs` and review the diff", err)
}

// firstDiff describes the first line where got differs from want.
func firstDiff(got, want string) error {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Errorf("line %d is %q, want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Errorf("%d lines, want %d", len(g), len(w))
}

// TestFlagReferenceComplete checks that the reference names every flag
// the commands parse: the shared FlagSet, render's, sync's, uninstall's and
// lbsvc-agent's own.
func TestFlagReferenceComplete(t *testing.T) {
	var doc bytes.Buffer
	if err := write(&doc); err != nil {
		t.Fatal(err)
	}
	_, shared, err := daemon.ParseConfig("ovnedge", nil)
	if err != nil {
		t.Fatal(err)
	}
	shared.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(doc.String(), "`--"+f.Name+"`") {
			t.Errorf("the flag reference lacks --%s", f.Name)
		}
	})
	for _, cmd := range []string{"render", "sync", "uninstall", "lbsvc-agent"} {
		flags := daemon.CommandFlags(cmd)
		if len(flags) == 0 {
			t.Errorf("ovnedge %s: no flags", cmd)
		}
		for _, f := range flags {
			if !strings.Contains(doc.String(), "`--"+f.Name+"`") {
				t.Errorf("ovnedge %s: the flag reference lacks --%s", cmd, f.Name)
			}
		}
	}
}
