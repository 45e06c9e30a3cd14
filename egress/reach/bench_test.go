package reach_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress/reach"
)

// BenchmarkProbeDiscard reports how long a DISCARD probe takes to answer
// "up" (connection refused), "down" (a silent address: the timeout) and
// "down" (a blackhole route), with a 300 ms timeout; the wall-clock numbers
// the tests only log.
func BenchmarkProbeDiscard(b *testing.B) {
	a, _ := twoHosts(b)
	for _, bc := range []struct {
		name, addr string
		up         bool
	}{{"refused-up", "192.0.2.2", true}, {"silent-timeout", "192.0.2.3", false}, {"blackhole", "198.51.100.1", false}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if up, err := reach.ProbeDiscard(context.Background(), nsDialer(a), netip.MustParseAddr(bc.addr), 300*time.Millisecond); up != bc.up {
					b.Fatalf("up = %v (%v), want %v", up, err, bc.up)
				}
			}
		})
	}
}

// BenchmarkCheckerDetect reports how long the Checker (interval and
// timeout 200 ms) takes to report a node down after a blackhole route
// cuts it off, and up after the route goes.
func BenchmarkCheckerDetect(b *testing.B) {
	a, _ := twoHosts(b)
	const interval, timeout = 200 * time.Millisecond, 200 * time.Millisecond
	changes := make(chan bool, 16)
	c, err := reach.NewChecker(reach.Config{Interval: interval, Timeout: timeout, Dial: nsDialer(a)},
		func(node string, up bool) { changes <- up })
	if err != nil {
		b.Fatal(err)
	}
	c.SetTargets([]reach.Target{{Node: "n", Addr: netip.MustParseAddr("192.0.2.2")}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	wait := func(want bool) time.Time {
		select {
		case up := <-changes:
			if up != want {
				b.Fatalf("reported up=%v, want %v", up, want)
			}
		case <-time.After(10 * time.Second):
			b.Fatalf("no report of up=%v", want)
		}
		return time.Now()
	}
	wait(true)
	var down, up time.Duration
	for b.Loop() {
		cut := time.Now()
		a.Run(b, "ip", "route", "add", "blackhole", "192.0.2.2/32")
		down += wait(false).Sub(cut)
		healed := time.Now()
		a.Run(b, "ip", "route", "del", "blackhole", "192.0.2.2/32")
		up += wait(true).Sub(healed)
	}
	b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "down-detect-ms")
	b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "up-detect-ms")
}
