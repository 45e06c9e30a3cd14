package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/ovnedge/ovnedge/testbed"
)

// Main is a test package's TestMain over one shared cluster: setup starts
// it with the program's T (what it starts is cleaned up when the tests
// end), then the tests run; it exits with their code. Without root
// (outside CI) the package is skipped.
func Main(m *testing.M, pkg string, setup func(t testbed.T)) {
	if os.Geteuid() != 0 && os.Getenv("CI") != "true" {
		fmt.Printf("SKIP (not CI): the %s cluster needs root\n", pkg)
		os.Exit(0)
	}
	p := &testbed.Program{}
	code := 1
	err := p.Run(func() {
		setup(p)
		code = m.Run()
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, pkg+":", err)
		code = 1
	}
	os.Exit(code)
}
