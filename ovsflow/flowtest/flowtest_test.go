package flowtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

func TestDiff(t *testing.T) {
	cases := []struct{ want, got, diff string }{
		{"a\nb\n", "b\na\n", "(same lines, different order or whitespace)\n"},
		{"a\nb\n", "a\nc\n", "- b\n+ c\n"},
		{"a\na\n", "a\n", "- a\n"},
	}
	for _, c := range cases {
		if d := flowtest.Diff(c.want, c.got); d != c.diff {
			t.Errorf("Diff(%q, %q) = %q, want %q", c.want, c.got, d, c.diff)
		}
	}
}

func TestGoldenMatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.flows")
	if err := os.WriteFile(path, []byte("priority=0 actions=NORMAL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flowtest.Golden(t, path, []byte("priority=0 actions=NORMAL\n"))
}

func TestGoldenUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "p.flows")
	flowtest.Options{Update: true}.Golden(t, path, []byte("priority=0 actions=drop\n"))
	if b, err := os.ReadFile(path); err != nil || string(b) != "priority=0 actions=drop\n" {
		t.Fatalf("after Update: %q, %v", b, err)
	}
	t.Setenv(flowtest.UpdateEnv, "1")
	flowtest.Golden(t, path, []byte("priority=0 actions=NORMAL\n"))
	if b, err := os.ReadFile(path); err != nil || string(b) != "priority=0 actions=NORMAL\n" {
		t.Fatalf("after %s=1: %q, %v", flowtest.UpdateEnv, b, err)
	}
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true} {
		t.Setenv(flowtest.UpdateEnv, v)
		if got := flowtest.Updating(); got != want {
			t.Errorf("%s=%q: Updating() = %v, want %v", flowtest.UpdateEnv, v, got, want)
		}
	}
}

// A golden mismatch fails the test and leaves the file alone.
func TestGoldenMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.flows")
	if err := os.WriteFile(path, []byte("priority=0 actions=NORMAL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{TB: t}
	flowtest.Options{}.Golden(rec, path, []byte("priority=0 actions=drop\n"))
	if !rec.failed || !strings.Contains(rec.msg, "- priority=0 actions=NORMAL") || !strings.Contains(rec.msg, "+ priority=0 actions=drop") {
		t.Errorf("mismatch: failed=%v msg %q", rec.failed, rec.msg)
	}
	if b, _ := os.ReadFile(path); string(b) != "priority=0 actions=NORMAL\n" {
		t.Errorf("file rewritten without Update: %q", b)
	}
}

type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}
