package scale

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// FlowMonitor follows a bridge's flow table changes through OpenFlow's
// flow monitor (`ovs-ofctl monitor <target> watch:!initial`), each change
// stamped as its line arrives: what a node instance programs, timed at
// the bridge without polling it.
type FlowMonitor struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	waiters []*flowWaiter
	ended   error // set once the monitor's output ends
	done    chan struct{}
}

type flowWaiter struct {
	match string
	at    chan time.Time
}

// StartFlowMonitor starts ovs-ofctl's flow monitor on target (a bridge's
// management socket, testbed.OVS.Mgmt), with its control socket in
// runDir, and returns once it follows the table. Close stops it.
func StartFlowMonitor(target, runDir string) (*FlowMonitor, error) {
	// ovs-ofctl answers the monitor request on stdout (through stdio:
	// stdbuf -oL writes it out at its newline) and prints the changes
	// on stderr, flushed one message at a time; both come through one
	// pipe here.
	cmd := exec.Command("stdbuf", "-oL", "ovs-ofctl", "monitor", target, "watch:!initial")
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+runDir)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("ovs-ofctl monitor %s: %w", target, err)
	}
	m := &FlowMonitor{cmd: cmd, done: make(chan struct{})}
	started := make(chan struct{})
	go m.read(r, started)
	select {
	case <-started:
		return m, nil
	case <-m.done:
		return nil, m.ended
	case <-time.After(10 * time.Second):
		m.Close()
		return nil, fmt.Errorf("ovs-ofctl monitor %s: no reply to the monitor request in 10 s", target)
	}
}

// read hands each change to the waiters whose match its line contains;
// started is closed at the reply to the monitor request. ovs-ofctl
// prints each monitor message's last line without a newline (the next
// message starts with one), so the lines are taken from each read as it
// comes rather than by newline; a message longer than a read could be
// cut, its cut line matched in two parts.
func (m *FlowMonitor) read(out io.ReadCloser, started chan struct{}) {
	defer close(m.done)
	defer out.Close()
	buf := make([]byte, 256<<10)
	first := true
	var err error
	var last string // the last output, for the error
	for {
		var n int
		n, err = out.Read(buf)
		at := time.Now()
		if n > 0 && first {
			first = false
			close(started)
		}
		if n > 0 {
			last = string(buf[:n])
		}
		for line := range strings.SplitSeq(string(buf[:n]), "\n") {
			if strings.Contains(line, "event=") {
				m.changed(at, line)
			}
		}
		if err != nil {
			break
		}
	}
	werr := m.cmd.Wait()
	m.mu.Lock()
	m.ended = fmt.Errorf("ovs-ofctl monitor ended: %v (%v): %s", err, werr, strings.TrimSpace(last))
	m.mu.Unlock()
}

// changed completes the waiters whose match line contains.
func (m *FlowMonitor) changed(at time.Time, line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waiters = slices.DeleteFunc(m.waiters, func(w *flowWaiter) bool {
		if !strings.Contains(line, w.match) {
			return false
		}
		w.at <- at
		return true
	})
}

// Expect registers a wait for the next flow change whose line (as
// ovs-ofctl prints it: "event=ADDED table=0 cookie=... nw_dst=...")
// contains match: call it, make the change, then Wait.
func (m *FlowMonitor) Expect(match string) *FlowExpectation {
	w := &flowWaiter{match: match, at: make(chan time.Time, 1)}
	m.mu.Lock()
	m.waiters = append(m.waiters, w)
	m.mu.Unlock()
	return &FlowExpectation{m: m, w: w}
}

// FlowExpectation is one registered wait (FlowMonitor.Expect).
type FlowExpectation struct {
	m *FlowMonitor
	w *flowWaiter
}

// Wait returns when the expected change arrived.
func (e *FlowExpectation) Wait(ctx context.Context) (time.Time, error) {
	select {
	case at := <-e.w.at:
		return at, nil
	case <-e.m.done:
		e.m.mu.Lock()
		defer e.m.mu.Unlock()
		return time.Time{}, e.m.ended
	case <-ctx.Done():
	}
	e.m.mu.Lock()
	e.m.waiters = slices.DeleteFunc(e.m.waiters, func(x *flowWaiter) bool { return x == e.w })
	e.m.mu.Unlock()
	select { // arrived meanwhile
	case at := <-e.w.at:
		return at, nil
	default:
		return time.Time{}, fmt.Errorf("no flow change matching %q: %w", e.w.match, ctx.Err())
	}
}

// Close stops the monitor (the process this started, by its PID).
func (m *FlowMonitor) Close() {
	_ = m.cmd.Process.Kill()
	<-m.done
}
