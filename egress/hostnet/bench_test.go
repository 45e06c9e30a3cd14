package hostnet

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ovnedge/ovnedge/testbed"
)

// benchNode is a node namespace with eg0 ready for egress IPs, and a
// Manager on it with the given backend.
func benchNode(b *testing.B, be backend) *Manager {
	b.Helper()
	testbed.Require(b, "ip", "sysctl", "iptables", "ip6tables", "nft")
	node := testbed.NewNetns(b, "hnbench")
	peer := testbed.NewNetns(b, "hnpeer")
	testbed.Link(b, node, "eg0", []string{"192.168.100.2/24"}, peer, "p0", nil)
	node.Run(b, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	_, mgr := openManager(b, be, node, nil)
	return mgr
}

// podState is one egress IP on eg0 with pods 10.244.x.y, n of them.
func podState(n int) State {
	a := Assignment{Link: "eg0", EgressIP: netip.MustParseAddr("192.168.100.50")}
	for i := range n {
		a.PodIPs = append(a.PodIPs, netip.AddrFrom4([4]byte{10, 244, byte(i / 250), byte(i%250 + 2)}))
	}
	return State{a}
}

func converge(b *testing.B, m *Manager, s State) time.Duration {
	b.Helper()
	start := time.Now()
	if _, err := m.Converge(context.Background(), s); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkConverge1000Pods converges 1,000 pods on one link from an
// empty host, for each backend in the same run; it reports the time of
// each (ms) and nftables' time as a fraction of iptables' (the baseline,
// upstream's backend).
func BenchmarkConverge1000Pods(b *testing.B) {
	ipt, nft := benchNode(b, backends[0]), benchNode(b, backends[1])
	full := podState(1000)
	var tIPT, tNFT time.Duration
	b.ResetTimer()
	for range b.N {
		tIPT += converge(b, ipt, full)
		tNFT += converge(b, nft, full)
		b.StopTimer()
		converge(b, ipt, nil)
		converge(b, nft, nil)
		b.StartTimer()
	}
	b.ReportMetric(float64(tIPT.Milliseconds())/float64(b.N), "iptables-ms")
	b.ReportMetric(float64(tNFT.Milliseconds())/float64(b.N), "nftables-ms")
	b.ReportMetric(float64(tNFT)/float64(tIPT), "nft/ipt")
}

// BenchmarkOnePodChange adds or removes one pod next to 1,000 others on
// the same link, for each backend in the same run: the whole Converge,
// listing the host's state included.
func BenchmarkOnePodChange(b *testing.B) {
	ipt, nft := benchNode(b, backends[0]), benchNode(b, backends[1])
	base, more := podState(1000), podState(1001)
	converge(b, ipt, base)
	converge(b, nft, base)
	var tIPT, tNFT time.Duration
	b.ResetTimer()
	for i := range b.N {
		s := more
		if i%2 == 1 {
			s = base
		}
		tIPT += converge(b, ipt, s)
		tNFT += converge(b, nft, s)
	}
	b.ReportMetric(float64(tIPT.Microseconds())/float64(b.N)/1000, "iptables-ms")
	b.ReportMetric(float64(tNFT.Microseconds())/float64(b.N)/1000, "nftables-ms")
	b.ReportMetric(float64(tNFT)/float64(tIPT), "nft/ipt")
}
