package metallb_test

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovnedge/ovnedge/bgp/metallb"
)

// A ToR per rack: each node peers with the router of its rack.
func ExamplePeers() {
	rack := func(r string) []metav1.LabelSelector {
		return []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": r}}}
	}
	peers := []*metallb.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: "tor-a"},
			Spec: metallb.BGPPeerSpec{MyASN: 64513, ASN: 65001, Address: "10.1.0.1", NodeSelectors: rack("a"), BFDProfile: "fast"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: "tor-b"},
			Spec: metallb.BGPPeerSpec{MyASN: 64513, ASN: 65002, Address: "10.2.0.1", NodeSelectors: rack("b")}},
	}
	ms := uint32(100)
	profiles := []*metallb.BFDProfile{{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Spec: metallb.BFDProfileSpec{TransmitInterval: &ms, ReceiveInterval: &ms}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"rack": "a"}}}
	got, events := metallb.Peers(node, netip.MustParseAddr("10.1.0.11"), peers, profiles)
	for _, p := range got {
		fmt.Printf("%v AS%d (local AS%d) BFD %v x%d\n", p.Address, p.ASN, p.LocalASN, p.BFD.Interval, p.BFD.Multiplier)
	}
	fmt.Println(len(events), "events")
	// Output:
	// 10.1.0.1 AS65001 (local AS64513) BFD 100ms x3
	// 0 events
}
