package flowtest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with the output of the tests")

// Golden compares got with the golden file at path and fails t with a line
// diff when they differ. With `go test -update` it rewrites the file
// instead (creating its directory): review that diff as you would code.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden %s: %v", path, err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden %s: %v", path, err)
		}
		t.Logf("golden %s rewritten", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run `go test -update` to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("golden %s differs (run `go test -update` to accept):\n%s", path, Diff(string(want), string(got)))
	}
}

// Diff is a line diff of two flow listings: lines only in want are
// prefixed "-", lines only in got "+". Flow programs are sets of lines, so
// order is ignored.
func Diff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		count[l]--
	}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		count[l]++
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		if count[l] < 0 {
			b.WriteString("- " + l + "\n")
			count[l]++
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if count[l] > 0 {
			b.WriteString("+ " + l + "\n")
			count[l]--
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order or whitespace)\n"
	}
	return b.String()
}
