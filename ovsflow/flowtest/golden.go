package flowtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// UpdateEnv is the environment variable that makes [Golden] rewrite golden
// files instead of comparing: `FLOWTEST_UPDATE=1 go test ./...`. flowtest
// registers no command-line flag, so a test package may define its own
// -update.
const UpdateEnv = "FLOWTEST_UPDATE"

// Options shape a golden comparison; the zero value compares.
type Options struct {
	// Update rewrites the golden file with got instead of comparing
	// (creating its directory).
	Update bool
}

// Updating reports whether $FLOWTEST_UPDATE asks for golden files to be
// rewritten: any value but "", "0" and "false".
func Updating() bool {
	v := os.Getenv(UpdateEnv)
	return v != "" && v != "0" && v != "false"
}

// Golden compares got with the golden file at path and fails t with a line
// diff when they differ. With FLOWTEST_UPDATE=1 in the environment it
// rewrites the file instead: review that diff as you would code.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	Options{Update: Updating()}.Golden(t, path, got)
}

// Golden compares got with the golden file at path, or rewrites it when
// o.Update is set; a test package with its own -update flag passes it
// here.
func (o Options) Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if o.Update {
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
		t.Fatalf("golden %s: %v (run with FLOWTEST_UPDATE=1 to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("golden %s differs (run with FLOWTEST_UPDATE=1 to accept):\n%s", path, Diff(string(want), string(got)))
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
