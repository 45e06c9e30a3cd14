package lbsvc

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// endpoint is one backend address of a service port.
type endpoint struct {
	addr netip.Addr
	// port is the target port the EndpointSlice names for the service port.
	port int32
	node string
	// ready is conditions.ready (nil counts as ready); serving and
	// terminating follow their conditions (nil serving = ready).
	ready, serving, terminating bool
}

// backend renders the endpoint as a vips value element: "ip:port" or
// "[ip6]:port".
func (e endpoint) backend() string { return hostPort(e.addr, e.port) }

// hostPort renders "ip:port" ("[ip6]:port").
func hostPort(a netip.Addr, port int32) string {
	return netip.AddrPortFrom(a, uint16(port)).String()
}

// portEndpoints collects the endpoints of one service port from the
// service's EndpointSlices: the slice port with the same name and protocol
// gives the target port. FQDN slices and unparseable addresses are skipped;
// an address listed by two slices counts once.
func portEndpoints(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice) []endpoint {
	var out []endpoint
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port, ok := slicePort(sp, s.Ports)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			c := ep.Conditions
			ready := c.Ready == nil || *c.Ready
			serving := ready
			if c.Serving != nil {
				serving = *c.Serving
			}
			terminating := c.Terminating != nil && *c.Terminating
			node := ""
			if ep.NodeName != nil {
				node = *ep.NodeName
			}
			for _, a := range ep.Addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil || addr.Is6() != (s.AddressType == discoveryv1.AddressTypeIPv6) {
					continue
				}
				out = append(out, endpoint{addr: addr.Unmap(), port: port, node: node,
					ready: ready, serving: serving, terminating: terminating})
			}
		}
	}
	// An address listed twice keeps its readiest listing (ready, then
	// serving, then not terminating), whatever the order of the slices:
	// as OVN-Kubernetes, which takes the union of the slices' ready
	// endpoints.
	rank := func(e endpoint) int { return b2i(!e.ready)*4 + b2i(!e.serving)*2 + b2i(e.terminating) }
	slices.SortFunc(out, func(a, b endpoint) int {
		if c := a.addr.Compare(b.addr); c != 0 {
			return c
		}
		if c := int(a.port) - int(b.port); c != 0 {
			return c
		}
		return rank(a) - rank(b)
	})
	return slices.CompactFunc(out, func(a, b endpoint) bool { return a.addr == b.addr && a.port == b.port })
}

// slicePort finds the EndpointSlice port serving sp: same name (unnamed
// matches unnamed) and protocol (nil is TCP).
func slicePort(sp corev1.ServicePort, ports []discoveryv1.EndpointPort) (int32, bool) {
	for _, p := range ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		spProto := sp.Protocol
		if spProto == "" {
			spProto = corev1.ProtocolTCP
		}
		if name == sp.Name && proto == spProto && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return *p.Port, true
		}
	}
	return 0, false
}

// selectBackends returns the backends of family v6 among eps for which
// keep is true: the ready ones, or when none is ready the serving and
// terminating ones, as a comma-joined vips value.
func selectBackends(eps []endpoint, v6 bool, keep func(endpoint) bool) string {
	var ready, fallback []string
	for _, e := range eps {
		if e.addr.Is6() != v6 || !keep(e) {
			continue
		}
		switch {
		case e.ready:
			ready = append(ready, e.backend())
		case e.serving && e.terminating:
			fallback = append(fallback, e.backend())
		}
	}
	if len(ready) == 0 {
		ready = fallback
	}
	return strings.Join(ready, ",")
}

// anyNode keeps every endpoint.
func anyNode(endpoint) bool { return true }

// onNode keeps the endpoints on node.
func onNode(node string) func(endpoint) bool {
	return func(e endpoint) bool { return e.node == node }
}
