package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// TestDemoMatchesGolden checks that `make demo` prints the reviewed golden
// program of the example node.
func TestDemoMatchesGolden(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	t.Cleanup(func() { os.Stdout = stdout })
	runErr := run(0)
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil || runErr != nil {
		t.Fatal(err, runErr)
	}
	want, err := os.ReadFile("../../testdata/flows/seed-node.flows")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(out), "\n")
	if !bytes.Equal([]byte(body), want) {
		t.Errorf("demo output differs from testdata/flows/seed-node.flows:\n%s", out)
	}
}
