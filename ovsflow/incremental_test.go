package ovsflow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

// model is a node's desired flows as plain inputs: the Services, the
// egress configuration and whether the base flows are on. Random edits
// change it; build makes a program from it from scratch.
type model struct {
	rng      *rand.Rand
	gw       brex.Gateway
	services map[string]brex.GatewayService
	egress   *brex.Egress
	base     bool
}

func newModel(seedN uint64) *model {
	return &model{rng: rand.New(rand.NewPCG(seedN, 19)), gw: brextest.Gateway(), services: map[string]brex.GatewayService{}}
}

// service is a random Service named name: VIPs from a small pool (two
// Services often share one, so their ARP bypass flows share a key),
// random ports, NodePorts and host-network targets.
func (m *model) service(name string) brex.GatewayService {
	r := m.rng
	svc := brex.GatewayService{Namespace: "ns" + fmt.Sprint(r.IntN(3)), Name: name}
	for range r.IntN(3) {
		if r.IntN(4) == 0 {
			svc.VIPs = append(svc.VIPs, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.IntN(20))}))
		} else {
			svc.VIPs = append(svc.VIPs, netip.AddrFrom4([4]byte{172, 18, 1, byte(r.IntN(60))}))
		}
	}
	slices.SortFunc(svc.VIPs, netip.Addr.Compare)
	svc.VIPs = slices.Compact(svc.VIPs)
	for i := range 1 + r.IntN(3) {
		p := brex.ServicePort{Protocol: []ovsflow.Proto{ovsflow.ProtoTCP, ovsflow.ProtoUDP}[r.IntN(2)], Port: int32(80 + 3*r.IntN(40) + i)}
		if r.IntN(2) == 0 {
			p.NodePort = int32(30000 + r.IntN(2000))
		}
		if r.IntN(5) == 0 {
			p.HostPort4 = int32(8000 + r.IntN(100))
		}
		svc.Ports = append(svc.Ports, p)
	}
	return svc
}

// edit changes the model at random: a Service added, changed or removed,
// and from step 10 on (so that the first applies have neither) the egress
// configuration set or removed or the base flows toggled.
func (m *model) edit(step int) string {
	r := m.rng
	n := r.IntN(10)
	if step < 10 {
		n = 0
	}
	switch {
	case n < 6:
		name := fmt.Sprint("svc", r.IntN(40))
		if _, ok := m.services[name]; ok && r.IntN(3) == 0 {
			delete(m.services, name)
			return "remove " + name
		}
		m.services[name] = m.service(name)
		return "set " + name
	case n < 8:
		if m.egress != nil && r.IntN(3) == 0 {
			m.egress = nil
			return "remove egress"
		}
		e := brextest.Egress()
		e.NodeSubnets = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(r.IntN(3)), 0}), 24)}
		m.egress = &e
		return "set egress"
	default:
		m.base = !m.base
		return fmt.Sprint("base ", m.base)
	}
}

// sets are the model's flow sets by owner; a Service whose flows conflict
// with another's is left out (and out of the model).
func (m *model) sets(t testing.TB) map[string][]ovsflow.Flow {
	out := map[string][]ovsflow.Flow{}
	var err error
	if m.base {
		if out["base"], err = brex.BaseFlows(m.gw.Base); err != nil {
			t.Fatal(err)
		}
	}
	if m.egress != nil {
		if out["egress"], err = brex.EgressFlows(*m.egress); err != nil {
			t.Fatal(err)
		}
	}
	for _, svc := range m.services {
		flows, err := brex.ServiceFlows(m.gw, svc)
		if err != nil {
			t.Fatalf("service %s: %v", svc.Name, err)
		}
		out[svc.Owner()] = flows
	}
	return out
}

// build makes a program from scratch holding sets.
func build(t testing.TB, sets map[string][]ovsflow.Flow) *ovsflow.Program {
	var p ovsflow.Program
	for _, o := range slices.Sorted(maps.Keys(sets)) {
		if err := p.Set(o, sets[o]); err != nil {
			t.Fatalf("full rebuild: %v", err)
		}
	}
	return &p
}

// update makes p hold sets as the daemon does: every owner set again
// (unchanged ones stay as they are), the others deleted. A set that
// conflicts with another owner's is refused and dropped from sets.
func update(p *ovsflow.Program, sets map[string][]ovsflow.Flow) {
	for _, o := range p.Owners() {
		if _, ok := sets[o]; !ok {
			p.Delete(o)
		}
	}
	for _, o := range slices.Sorted(maps.Keys(sets)) {
		if err := p.Set(o, sets[o]); err != nil {
			p.Delete(o)
			delete(sets, o)
		}
	}
}

// memBridge is a Transport holding flows in memory, as a switch would:
// add replaces a flow with the same key whole, modify_strict its actions.
type memBridge struct {
	mu    sync.Mutex
	flows map[string]ovsflow.Flow
}

func (b *memBridge) Dump(context.Context, string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for _, f := range b.flows {
		sb.WriteString(f.String() + "\n")
	}
	return []byte(sb.String()), nil
}

func (b *memBridge) Replace(_ context.Context, _ string, flows []byte) error {
	fl, err := ovsflow.ParseFlows(flows)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flows = map[string]ovsflow.Flow{}
	for _, f := range fl {
		b.flows[keyOf(f)] = f
	}
	return nil
}

func (b *memBridge) Bundle(_ context.Context, _ string, mods []ovsflow.FlowMod) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flows == nil {
		b.flows = map[string]ovsflow.Flow{}
	}
	for _, m := range mods {
		if m.Op == ovsflow.ModDeleteStrict {
			if _, ok := b.flows[m.Flow]; !ok {
				return fmt.Errorf("delete of %q: no such flow", m.Flow)
			}
			delete(b.flows, m.Flow)
			continue
		}
		f, err := ovsflow.ParseFlow(m.Flow)
		if err != nil {
			return err
		}
		k := keyOf(f)
		if old, ok := b.flows[k]; ok && m.Op == ovsflow.ModModifyStrict {
			f.Cookie = old.Cookie
		}
		b.flows[k] = f
	}
	return nil
}

func (b *memBridge) Watch(context.Context, string) <-chan struct{} { return nil }

// foreignFlow is another controller's flow, which the Applier keeps;
// leftoverFlow one with the base flows' cookie that no program emits, as
// a previous process may leave: deleted once the cookie is the
// Applier's (at once with Owns, else once base or egress flows are
// applied).
const (
	foreignFlow  = "cookie=0x99, priority=300,udp actions=drop"
	leftoverFlow = "cookie=0xdeff105, priority=301,udp actions=drop"
)

// checkIncremental applies steps random edit rounds to tr, each through
// an Applier that diffs only the owners that changed, and after each
// compares what the bridge holds (dump) with a program built from
// scratch, plus the foreign flow (and the leftover one while the Applier
// has no reason to delete it). With owns the Applier claims this
// gateway program's flows (brex.Owns(true)), as the daemon's does. Rounds alternate, at random, between
// the daemon's way (a Clone updated then applied), updating the applied
// program in place, and a program built anew (owners compared one by
// one).
func checkIncremental(t *testing.T, seedN uint64, steps int, owns bool, tr ovsflow.Transport, dump func() []byte) {
	ctx := ctxFor(t)
	m := newModel(seedN)
	// Thousands of applies: their logs are left out.
	opts := ovsflow.ApplierOptions{KeepForeign: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if owns {
		opts.Owns = brex.Owns(true)
	}
	leftover := !owns
	a := ovsflow.NewApplier(brextest.Bridge, tr, ovsflow.StaticPorts(brextest.Ports), opts)
	cur := &ovsflow.Program{}
	var log []string
	for step := range steps {
		for range 1 + m.rng.IntN(3) {
			log = append(log, m.edit(step))
		}
		sets := m.sets(t)
		p := cur
		switch m.rng.IntN(6) {
		case 0:
			p = &ovsflow.Program{}
		case 1:
		default:
			p = cur.Clone()
		}
		update(p, sets)
		if _, err := a.Apply(ctx, p); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		cur = p
		leftover = leftover && !m.base && m.egress == nil
		want, err := build(t, sets).Render(brextest.Ports)
		if err != nil {
			t.Fatal(err)
		}
		others := foreignFlow + "\n"
		if leftover {
			others += leftoverFlow + "\n"
		}
		if want, err = ovsflow.SortDump(append([]byte(others), want...)); err != nil {
			t.Fatal(err)
		}
		if got := dump(); string(got) != string(want) {
			t.Fatalf("step %d after %v: the bridge differs from a full rebuild:\n%s", step, log[max(0, len(log)-6):],
				flowtest.Diff(string(want), string(got)))
		}
	}
}

// Long random sequences of owner edits, applied incrementally, leave the
// bridge holding exactly what a full rebuild of the program renders,
// after every step: in memory for thousands of steps, and on a real
// bridge (native transport, dumped through ovs-ofctl) for a few hundred.
func TestIncrementalApplyEqualsFullRebuild(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		for seedN := range uint64(4) {
			mem := &memBridge{}
			if err := mem.Replace(context.Background(), "", []byte(foreignFlow+"\n"+leftoverFlow+"\n")); err != nil {
				t.Fatal(err)
			}
			checkIncremental(t, seedN, 300, seedN%2 == 0, mem, func() []byte {
				d, _ := mem.Dump(context.Background(), "")
				sorted, err := ovsflow.SortDump(d)
				if err != nil {
					t.Fatal(err)
				}
				return sorted
			})
		}
	})
	t.Run("bridge", func(t *testing.T) {
		br := brextest.NewBridge(t)
		br.Ofctl("add-flow", br.Mgmt(), "cookie=0x99,priority=300,udp,actions=drop")
		br.Ofctl("add-flow", br.Mgmt(), "cookie=0xdeff105,priority=301,udp,actions=drop")
		br.Ofctl("del-flows", br.Mgmt(), "--strict", "priority=0") // the default NORMAL flow
		checkIncremental(t, 42, 300, false, nativeFor(t, br, 0), br.Dump)
	})
}
