package testbed

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// Program is the T of a program (such as `make demo`) rather than a
// test: logs go to stderr, Fatalf and Skipf stop the program's work (Run)
// and cleanups run in reverse order, as in a test. A program cannot skip:
// a missing prerequisite is a failure.
type Program struct {
	// Quiet drops Logf's messages (errors are still written).
	Quiet bool

	failed   bool
	cleanups []func()
}

// stop unwinds the work after Fatalf or Skipf.
type stop struct{ msg string }

func (r *Program) Helper() {}

func (r *Program) Logf(format string, args ...any) {
	if !r.Quiet {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

func (r *Program) Errorf(format string, args ...any) {
	r.failed = true
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *Program) Fatalf(format string, args ...any) {
	r.failed = true
	panic(stop{fmt.Sprintf(format, args...)})
}

func (r *Program) Skipf(format string, args ...any) {
	r.Fatalf("cannot run: "+format, args...)
}

func (r *Program) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *Program) Failed() bool { return r.failed }

// Run calls work, then the cleanups, and returns why work failed.
func (r *Program) Run(work func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s, ok := p.(stop)
			if !ok {
				panic(p)
			}
			err = errors.New(s.msg)
		}
		for _, f := range slices.Backward(r.cleanups) {
			f()
		}
		if err == nil && r.failed {
			err = errors.New("failed (see the log above)")
		}
	}()
	work()
	return nil
}
