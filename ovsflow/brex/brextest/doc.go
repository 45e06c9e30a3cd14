// Package brextest holds an example node as typed ovsflow/brex inputs and
// its golden programs: node ovn-worker2 of OVN-Kubernetes' EgressIP
// feature page (ovn-kubernetes/ovn-kubernetes,
// docs/features/cluster-egress-controls/egress-ip.md: bridge breth0, node
// subnet 10.244.2.0/24 in cluster subnet 10.244.0.0/16, node IP 172.18.0.3)
// with two Services. ovnedge's golden tests (testdata/flows), real-OVS
// tests, benchmarks and examples/seed build from it:
//
//	p, err := brextest.Program(brextest.Parts{Base: true, Egress: true, Services: true})
//	text, err := p.Render(brextest.Ports)
package brextest
