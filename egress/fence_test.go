package egress_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/egress"
)

func TestFence(t *testing.T) {
	a, b := netip.MustParseAddr("172.18.0.46"), netip.MustParseAddr("2001:db8::46")
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	f := egress.Fence{Hold: 10 * time.Second}
	for _, step := range []struct {
		name   string
		at     float64
		held   []netip.Addr
		fenced []netip.Addr
		next   float64 // 0: none
	}{
		{name: "first view: nothing lost yet", at: 0, held: []netip.Addr{a}},
		{name: "never held: not fenced", at: 0.5, held: []netip.Addr{a}},
		{name: "a moves away", at: 1, held: nil, fenced: []netip.Addr{a}, next: 11},
		{name: "b comes and goes", at: 2, held: []netip.Addr{b}, fenced: []netip.Addr{a}, next: 11},
		{name: "b lost too", at: 3, held: nil, fenced: []netip.Addr{a, b}, next: 11},
		{name: "a back: its fence lifts at once", at: 4, held: []netip.Addr{a}, fenced: []netip.Addr{b}, next: 13},
		{name: "a lost again: fenced anew", at: 5, held: nil, fenced: []netip.Addr{a, b}, next: 13},
		{name: "b's hold is over", at: 13, held: nil, fenced: []netip.Addr{a}, next: 15},
		{name: "all over", at: 15, held: nil},
	} {
		fenced, next := f.Update(at(step.at), step.held)
		var want time.Time
		if step.next != 0 {
			want = at(step.next)
		}
		if !slices.Equal(fenced, step.fenced) || !next.Equal(want) {
			t.Errorf("%s: fenced %v until %v, want %v until %v", step.name, fenced, next, step.fenced, want)
		}
	}
}

// TestFenceResume: the fences a previous process left last a whole hold
// from the resume; one the node holds again lifts at once.
func TestFenceResume(t *testing.T) {
	a, b := netip.MustParseAddr("172.18.0.46"), netip.MustParseAddr("172.18.0.47")
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	f := egress.Fence{Hold: 10 * time.Second}
	f.Resume(t0, []netip.Addr{a, b})
	f.Resume(t0.Add(5*time.Second), []netip.Addr{a}) // already fenced: unchanged
	fenced, next := f.Update(t0.Add(time.Second), []netip.Addr{b})
	if !slices.Equal(fenced, []netip.Addr{a}) || !next.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("fenced %v until %v, want [%v] until +10s", fenced, next, a)
	}
	if fenced, _ = f.Update(t0.Add(10*time.Second), []netip.Addr{b}); len(fenced) != 0 {
		t.Fatalf("fenced %v after the hold", fenced)
	}
}

func ExampleFence() {
	ip := netip.MustParseAddr("172.18.0.46")
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	var f egress.Fence
	f.Update(now, []netip.Addr{ip}) // the node holds the egress IP
	fenced, until := f.Update(now.Add(time.Second), nil)
	fmt.Println(fenced, until.Sub(now))
	fenced, _ = f.Update(now.Add(time.Minute), nil)
	fmt.Println(fenced)
	// Output:
	// [172.18.0.46] 31s
	// []
}
