package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/ovnedge/ovnedge/event"
)

// Event reasons.
const (
	ReasonInvalidIP   = "InvalidLoadBalancerIP"
	ReasonOutsidePool = "LoadBalancerIPOutsidePool"
	ReasonExcluded    = "LoadBalancerIPExcluded"
	ReasonTaken       = "LoadBalancerIPTaken"
	ReasonUnknownPool = "UnknownPool"
	ReasonExhausted   = "NoLoadBalancerIPAvailable"
	ReasonDuplicate   = "DuplicateLoadBalancerIP"
	ReasonAllocated   = "LoadBalancerIPAllocated"
	ReasonGateway     = "LoadBalancerIPIsGateway"
)

// Result is the outcome of an allocation.
type Result struct {
	// Ingress is the status.loadBalancer.ingress to write: the Service's
	// addresses, or nil when it gets none (Events say why).
	Ingress []corev1.LoadBalancerIngress
	Events  []event.Event
}

// Allocator hands out LoadBalancer addresses from pools, never one
// address to two Services. It keeps its bookkeeping in memory: after a
// restart, Rebuild it from the Services' statuses before allocating. It
// is safe for concurrent use.
type Allocator struct {
	pools []*Pool

	mu    sync.Mutex
	owner map[netip.Addr]string   // address -> "<ns>/<name>"
	held  map[string][]netip.Addr // "<ns>/<name>" -> addresses
}

// NewAllocator returns an allocator over pools, tried in order. Two pools
// may share a name only when they are of different families (the two
// blocks of a dual-stack Subnet, see NewSubnetPools); CIDRs must not
// overlap.
func NewAllocator(pools ...*Pool) (*Allocator, error) {
	if err := checkPools(pools); err != nil {
		return nil, err
	}
	return &Allocator{pools: slices.Clone(pools), owner: map[netip.Addr]string{}, held: map[string][]netip.Addr{}}, nil
}

func checkPools(pools []*Pool) error {
	for i, p := range pools {
		if p == nil {
			return fmt.Errorf("allocator: pool %d is nil", i)
		}
		for _, q := range pools[:i] {
			if q.Name == p.Name && q.CIDR.Addr().Is4() == p.CIDR.Addr().Is4() {
				return fmt.Errorf("allocator: two %s pools named %q", family(p.CIDR.Addr().Is6()), p.Name)
			}
			if q.CIDR.Overlaps(p.CIDR) {
				return fmt.Errorf("allocator: pools %q (%s) and %q (%s) overlap", q.Name, q.CIDR, p.Name, p.CIDR)
			}
		}
	}
	return nil
}

// SetPools replaces the pools (a Subnet's CIDR or excludeIps changed).
// Services keep the addresses they hold that are still in a pool's usable
// range, even ones now excluded, as Kube-OVN's pods keep theirs; the
// others are forgotten (the Service's next Allocate gives it new ones).
func (a *Allocator) SetPools(pools ...*Pool) error {
	if err := checkPools(pools); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pools = slices.Clone(pools)
	for ip, k := range a.owner {
		if p := a.poolOf(ip, a.pools); p == nil || p.inRange(ip) != nil {
			delete(a.owner, ip)
			a.held[k] = slices.DeleteFunc(a.held[k], func(x netip.Addr) bool { return x == ip })
			if len(a.held[k]) == 0 {
				delete(a.held, k)
			}
		}
	}
	return nil
}

func key(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// Rebuild forgets every allocation and re-learns them from the
// status.loadBalancer.ingress of the LoadBalancer Services, oldest Service
// first: an address two Services claim stays with the older one and the
// younger gets a DuplicateLoadBalancerIP event (its next Allocate gives it
// another address). Addresses outside every pool are not the allocator's
// and are ignored.
func (a *Allocator) Rebuild(svcs []*corev1.Service) []event.Event {
	sorted := slices.DeleteFunc(slices.Clone(svcs), func(s *corev1.Service) bool {
		return s == nil || s.Spec.Type != corev1.ServiceTypeLoadBalancer
	})
	slices.SortStableFunc(sorted, func(x, y *corev1.Service) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(key(x), key(y))
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.owner)
	clear(a.held)
	var events []event.Event
	for _, svc := range sorted {
		k := key(svc)
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil || a.poolOf(ip, a.pools) == nil {
				continue
			}
			ip = ip.Unmap()
			if o, ok := a.owner[ip]; ok {
				if o != k {
					events = append(events, warn(svc, ReasonDuplicate, "%s is also in the status of the older Service %s; it stays there", ip, o))
				}
				continue
			}
			a.owner[ip] = k
			a.held[k] = append(a.held[k], ip)
		}
	}
	return events
}

// Allocate returns the addresses of a Service: for a Service that is not
// type LoadBalancer none (and its addresses are released). A
// spec.loadBalancerIP is validated as Kube-OVN validates a static
// address: it must parse, lie in the usable range of one of the pools,
// not be its gateway, and not belong to another Service (it may be
// excluded: excludeIps only keep addresses out of random allocation);
// otherwise the Service gets an event and no address. Without one, the
// Service gets one address for each family of spec.ipFamilies (IPv4 when
// empty) that the pools have: the one it holds while it stays in the
// pool's usable range (even if excluded since), else the lowest free one
// of the first pool with room. All or nothing, as Kube-OVN's dual-stack
// allocation: when one family has no free address the Service gets an
// event and keeps exactly what it holds. poolNames, when given, restrict
// the pools to those named (e.g. the subnet of a Kube-OVN logical_switch
// annotation).
func (a *Allocator) Allocate(svc *corev1.Service, poolNames ...string) Result {
	if svc == nil {
		return Result{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key(svc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		a.release(k, nil)
		return Result{}
	}
	pools, events := a.selectPools(svc, poolNames)
	if pools == nil {
		a.release(k, nil)
		return Result{Events: events}
	}
	var want []netip.Addr
	if s := svc.Spec.LoadBalancerIP; s != "" {
		ip, ev := a.static(svc, s, pools)
		if ev != nil {
			a.release(k, nil)
			return Result{Events: []event.Event{*ev}}
		}
		want = []netip.Addr{ip}
	} else {
		var fresh []event.Event
		failed := false
		for _, v6 := range a.families(svc, pools) {
			ip, ok := a.keep(k, v6, pools)
			if !ok {
				ip, ok = a.fresh(v6, pools)
				if !ok {
					events = append(events, warn(svc, ReasonExhausted, "no free %s address in pools %s", family(v6), poolList(pools)))
					failed = true
					continue
				}
				fresh = append(fresh, event.Normalf(event.Ref("v1", "Service", svc), ReasonAllocated, "%s from pool %q", ip, a.poolOf(ip, pools).Name))
			}
			want = append(want, ip)
		}
		if len(want) == 0 && !failed {
			events = append(events, warn(svc, ReasonExhausted, "no pool of the Service's families (%s) among pools %s", familyList(svc), poolList(pools)))
		}
		if failed {
			res := Result{Events: events}
			for _, ip := range a.held[k] {
				res.Ingress = append(res.Ingress, corev1.LoadBalancerIngress{IP: ip.String()})
			}
			return res
		}
		events = append(events, fresh...)
	}
	a.release(k, want)
	for _, ip := range want {
		if a.owner[ip] != k {
			a.owner[ip] = k
			a.held[k] = append(a.held[k], ip)
		}
	}
	res := Result{Events: events}
	for _, ip := range want {
		res.Ingress = append(res.Ingress, corev1.LoadBalancerIngress{IP: ip.String()})
	}
	return res
}

// IngressEqual reports whether the ingress list want (as Allocate makes
// it) is what a Service's status holds, have: the same entries in order,
// an unset ipMode equal to VIP. The API server (1.30 and later) defaults
// ipMode of an ingress IP to VIP, so a Service whose status ovnedge wrote
// reads back with it; comparing plainly would rewrite the status on every
// pass.
func IngressEqual(want, have []corev1.LoadBalancerIngress) bool {
	norm := func(in []corev1.LoadBalancerIngress) []corev1.LoadBalancerIngress {
		out := make([]corev1.LoadBalancerIngress, len(in))
		for i, x := range in {
			out[i] = *x.DeepCopy()
			if out[i].IP != "" && out[i].IPMode == nil {
				vip := corev1.LoadBalancerIPModeVIP
				out[i].IPMode = &vip
			}
			if len(out[i].Ports) == 0 {
				out[i].Ports = nil
			}
		}
		return out
	}
	return equality.Semantic.DeepEqual(norm(want), norm(have))
}

// Release frees the addresses of a deleted Service.
func (a *Allocator) Release(namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.release(namespace+"/"+name, nil)
}

// Owner returns the Service ("<ns>/<name>") holding ip, if any.
func (a *Allocator) Owner(ip netip.Addr) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.owner[ip.Unmap()]
	return o, ok
}

// release frees k's addresses except those in keep.
func (a *Allocator) release(k string, keep []netip.Addr) {
	var still []netip.Addr
	for _, ip := range a.held[k] {
		if slices.Contains(keep, ip) {
			still = append(still, ip)
		} else if a.owner[ip] == k {
			delete(a.owner, ip)
		}
	}
	if len(still) == 0 {
		delete(a.held, k)
	} else {
		a.held[k] = still
	}
}

func (a *Allocator) selectPools(svc *corev1.Service, names []string) ([]*Pool, []event.Event) {
	if len(names) == 0 {
		if len(a.pools) == 0 {
			return nil, []event.Event{warn(svc, ReasonUnknownPool, "no LoadBalancer pool is configured")}
		}
		return a.pools, nil
	}
	var out []*Pool
	var events []event.Event
	for _, n := range names {
		found := false
		for _, p := range a.pools {
			if p.Name == n {
				out, found = append(out, p), true
			}
		}
		if !found {
			events = append(events, warn(svc, ReasonUnknownPool, "pool %q does not exist", n))
		}
	}
	return out, events
}

// static validates a requested spec.loadBalancerIP.
func (a *Allocator) static(svc *corev1.Service, s string, pools []*Pool) (netip.Addr, *event.Event) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		ev := warn(svc, ReasonInvalidIP, "spec.loadBalancerIP %q is not an IP address", s)
		return ip, &ev
	}
	ip = ip.Unmap()
	p := a.poolOf(ip, pools)
	if p == nil {
		ev := warn(svc, ReasonOutsidePool, "spec.loadBalancerIP %s is outside pools %s", ip, poolList(pools))
		return ip, &ev
	}
	if err := p.Assignable(ip); err != nil {
		reason := ReasonExcluded
		if ip == p.Gateway {
			reason = ReasonGateway
		}
		ev := warn(svc, reason, "spec.loadBalancerIP %v", err)
		return ip, &ev
	}
	if o, ok := a.owner[ip]; ok && o != key(svc) {
		ev := warn(svc, ReasonTaken, "spec.loadBalancerIP %s is already allocated to Service %s", ip, o)
		return ip, &ev
	}
	return ip, nil
}

// keep returns an address k holds of the family that is still in the
// usable range of one of pools (excluded or not: Kube-OVN keeps a pod's
// address when excludeIps grow over it).
func (a *Allocator) keep(k string, v6 bool, pools []*Pool) (netip.Addr, bool) {
	for _, ip := range a.held[k] {
		if ip.Is6() != v6 {
			continue
		}
		if p := a.poolOf(ip, pools); p != nil && p.inRange(ip) == nil {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func (a *Allocator) fresh(v6 bool, pools []*Pool) (netip.Addr, bool) {
	taken := func(ip netip.Addr) bool { _, ok := a.owner[ip]; return ok }
	for _, p := range pools {
		if p.CIDR.Addr().Is6() != v6 {
			continue
		}
		if ip, ok := p.next(taken); ok {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func (a *Allocator) poolOf(ip netip.Addr, pools []*Pool) *Pool {
	for _, p := range pools {
		if p.CIDR.Contains(ip.Unmap()) {
			return p
		}
	}
	return nil
}

// families lists the families (false IPv4, true IPv6) of spec.ipFamilies,
// IPv4 when empty, that pools have.
func (a *Allocator) families(svc *corev1.Service, pools []*Pool) []bool {
	return slices.DeleteFunc(families(svc), func(v6 bool) bool {
		return !slices.ContainsFunc(pools, func(p *Pool) bool { return p.CIDR.Addr().Is6() == v6 })
	})
}

func familyList(svc *corev1.Service) string {
	var s []string
	for _, v6 := range families(svc) {
		s = append(s, family(v6))
	}
	return strings.Join(s, ", ")
}

func families(svc *corev1.Service) []bool {
	var out []bool
	for _, f := range svc.Spec.IPFamilies {
		v6 := f == corev1.IPv6Protocol
		if !slices.Contains(out, v6) {
			out = append(out, v6)
		}
	}
	if len(out) == 0 {
		out = []bool{false}
	}
	return out
}

func family(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

func poolList(pools []*Pool) string {
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = fmt.Sprintf("%q (%s)", p.Name, p.CIDR)
	}
	return strings.Join(names, ", ")
}

func warn(svc *corev1.Service, reason, format string, args ...any) event.Event {
	return event.Warningf(event.Ref("v1", "Service", svc), reason, format, args...)
}
