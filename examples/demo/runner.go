package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// runner is the testbed.T of a program: logs go to stderr, Fatalf and
// Skipf stop the program's work and cleanups run in reverse order, as in
// a test. A program cannot skip: a missing prerequisite is a failure.
type runner struct {
	failed   bool
	cleanups []func()
}

// stop unwinds the work after Fatalf or Skipf.
type stop struct{ msg string }

func (r *runner) Helper() {}

func (r *runner) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func (r *runner) Errorf(format string, args ...any) {
	r.failed = true
	r.Logf(format, args...)
}

func (r *runner) Fatalf(format string, args ...any) {
	r.failed = true
	panic(stop{fmt.Sprintf(format, args...)})
}

func (r *runner) Skipf(format string, args ...any) {
	r.Fatalf("cannot run: "+format, args...)
}

func (r *runner) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *runner) Failed() bool { return r.failed }

// run calls work, then the cleanups, and returns why work failed.
func (r *runner) run(work func()) (err error) {
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
