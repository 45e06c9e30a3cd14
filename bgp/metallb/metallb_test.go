package metallb

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/bgp"
)

var routerID = netip.MustParseAddr("172.18.0.2")

func node(name string, lbls map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func peer(name string, spec BGPPeerSpec) *BGPPeer {
	return &BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: name}, Spec: spec}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
func u32(v uint32) *uint32                 { return &v }

// TestPeerValidation ports the BGPPeer cases of MetalLB's
// internal/config tests (peerFromCR, parseTimers) and adds ovnedge's
// refusals; every invalid object refuses only itself.
func TestPeerValidation(t *testing.T) {
	base := BGPPeerSpec{MyASN: 64513, ASN: 64512, Address: "172.18.0.1"}
	with := func(f func(*BGPPeerSpec)) BGPPeerSpec { s := base; f(&s); return s }
	want := bgp.Peer{Address: netip.MustParseAddr("172.18.0.1"), ASN: 64512, LocalASN: 64513, DisableGracefulRestart: true}
	for _, tc := range []struct {
		name    string
		spec    BGPPeerSpec
		want    *bgp.Peer // nil: refused
		wantErr string
	}{
		{name: "minimal", spec: base, want: &want},
		{name: "missing local ASN", spec: with(func(s *BGPPeerSpec) { s.MyASN = 0 }), wantErr: "missing local ASN"},
		{name: "missing peer ASN", spec: with(func(s *BGPPeerSpec) { s.ASN = 0 }), wantErr: "missing peer ASN"},
		{name: "dynamic ASN", spec: with(func(s *BGPPeerSpec) { s.ASN = 0; s.DynamicASN = "external" }), wantErr: "dynamicASN is not supported"},
		{name: "ebgp multihop on ibgp", spec: with(func(s *BGPPeerSpec) { s.ASN = 64513; s.EBGPMultiHop = true }),
			wantErr: "invalid ebgp-multihop parameter set for an ibgp peer"},
		{name: "invalid address", spec: with(func(s *BGPPeerSpec) { s.Address = "1.2.3.400" }), wantErr: `invalid BGPPeer address "1.2.3.400"`},
		{name: "invalid source", spec: with(func(s *BGPPeerSpec) { s.SrcAddress = "x" }), wantErr: `invalid source IP "x"`},
		{name: "hold time too short", spec: with(func(s *BGPPeerSpec) { s.HoldTime = dur(time.Second) }), wantErr: "must be 0 or >=3s"},
		{name: "keepalive above hold", spec: with(func(s *BGPPeerSpec) { s.HoldTime = dur(9 * time.Second); s.KeepaliveTime = dur(10 * time.Second) }),
			wantErr: "must be lower than holdTime"},
		{name: "hold time only", spec: with(func(s *BGPPeerSpec) { s.HoldTime = dur(9 * time.Second) }),
			want: &bgp.Peer{Address: want.Address, ASN: 64512, LocalASN: 64513, HoldTime: 9 * time.Second, Keepalive: 3 * time.Second, DisableGracefulRestart: true}},
		{name: "keepalive only", spec: with(func(s *BGPPeerSpec) { s.KeepaliveTime = dur(5 * time.Second) }),
			want: &bgp.Peer{Address: want.Address, ASN: 64512, LocalASN: 64513, HoldTime: 15 * time.Second, Keepalive: 5 * time.Second, DisableGracefulRestart: true}},
		{name: "hold time zero", spec: with(func(s *BGPPeerSpec) { s.HoldTime = dur(0) }), want: &want},
		{name: "connect time not whole", spec: with(func(s *BGPPeerSpec) { s.ConnectTime = dur(1500 * time.Millisecond) }), wantErr: "whole number of seconds"},
		{name: "password and secret", spec: with(func(s *BGPPeerSpec) { s.Password = "a"; s.PasswordSecret.Name = "s" }),
			wantErr: "can not have both password and secret ref set"},
		{name: "password secret", spec: with(func(s *BGPPeerSpec) { s.PasswordSecret.Name = "s" }), wantErr: "passwordSecret is not supported"},
		{name: "vrf", spec: with(func(s *BGPPeerSpec) { s.VRFName = "red" }), wantErr: `vrf "red" is not supported`},
		{name: "other router id", spec: with(func(s *BGPPeerSpec) { s.RouterID = "10.0.0.1" }), wantErr: "differs from the node's"},
		{name: "same router id", spec: with(func(s *BGPPeerSpec) { s.RouterID = routerID.String() }), want: &want},
		{name: "unknown BFD profile", spec: with(func(s *BGPPeerSpec) { s.BFDProfile = "nope" }), wantErr: `BFD profile "nope" not found`},
		{name: "duplicate node selectors", spec: with(func(s *BGPPeerSpec) {
			sel := metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			s.NodeSelectors = []metav1.LabelSelector{sel, sel}
		}), wantErr: "duplicate definition of nodeSelectors"},
		{name: "everything", spec: BGPPeerSpec{MyASN: 65000, ASN: 65001, Address: "fd00:18::1", SrcAddress: "fd00:18::2", Port: 1179,
			HoldTime: dur(30 * time.Second), KeepaliveTime: dur(5 * time.Second), ConnectTime: dur(2 * time.Second), Password: "pw",
			BFDProfile: "fast", EnableGracefulRestart: true, EBGPMultiHop: true},
			want: &bgp.Peer{Address: netip.MustParseAddr("fd00:18::1"), ASN: 65001, LocalASN: 65000, Port: 1179,
				LocalAddress: netip.MustParseAddr("fd00:18::2"), HoldTime: 30 * time.Second, Keepalive: 5 * time.Second,
				ConnectRetry: 2 * time.Second, Password: "pw", Multihop: 255,
				BFD: bgp.BFD{Enabled: true, Interval: 100 * time.Millisecond, ReceiveInterval: 200 * time.Millisecond, Multiplier: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fast := &BFDProfile{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
				Spec: BFDProfileSpec{TransmitInterval: u32(100), ReceiveInterval: u32(200), DetectMultiplier: u32(5)}}
			other := peer("z-other", BGPPeerSpec{MyASN: 64513, ASN: 64512, Address: "172.18.0.9"})
			got, evs := Peers(node("n1", nil), routerID, []*BGPPeer{peer("a", tc.spec), other}, []*BFDProfile{fast})
			if tc.want == nil {
				if len(evs) != 1 || !strings.Contains(evs[0].Message, tc.wantErr) || evs[0].Object.Name != "a" || evs[0].Reason != ReasonInvalid {
					t.Fatalf("events %v, want one about a containing %q", evs, tc.wantErr)
				}
				if len(got) != 1 || got[0].Address != netip.MustParseAddr("172.18.0.9") {
					t.Fatalf("peers %+v, want only the valid other peer", got)
				}
				return
			}
			if len(evs) != 0 {
				t.Fatalf("events %v", evs)
			}
			var mine *bgp.Peer
			for i := range got {
				if got[i].Address == tc.want.Address {
					mine = &got[i]
				}
			}
			if mine == nil || !reflect.DeepEqual(*mine, *tc.want) {
				t.Fatalf("peer %+v, want %+v", mine, *tc.want)
			}
			if err := (&bgp.Config{ASN: 64513, RouterID: routerID, Peers: got}).Validate(); err != nil {
				t.Fatalf("converted peers do not validate: %v", err)
			}
		})
	}
}

// TestBFDProfileValidation ports MetalLB's bfdProfileFromCR ranges.
func TestBFDProfileValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    BFDProfileSpec
		want    bgp.BFD
		wantErr string
	}{
		{name: "defaults", want: bgp.BFD{Enabled: true, Interval: 300 * time.Millisecond, ReceiveInterval: 300 * time.Millisecond, Multiplier: 3}},
		{name: "receive too small", spec: BFDProfileSpec{ReceiveInterval: u32(9)}, wantErr: "invalid receive interval value 9"},
		{name: "transmit too large", spec: BFDProfileSpec{TransmitInterval: u32(60001)}, wantErr: "invalid transmit interval value 60001"},
		{name: "multiplier too small", spec: BFDProfileSpec{DetectMultiplier: u32(1)}, wantErr: "invalid detect multiplier value 1"},
		{name: "echo ignored", spec: BFDProfileSpec{EchoMode: new(bool), EchoInterval: u32(50), MinimumTTL: u32(254)},
			want: bgp.BFD{Enabled: true, Interval: 300 * time.Millisecond, ReceiveInterval: 300 * time.Millisecond, Multiplier: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bfdFrom(&BFDProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestNodeSelection: no selectors select every node; otherwise any
// matching selector does. A second object for one address is refused on
// the nodes where both apply.
func TestNodeSelection(t *testing.T) {
	rack1 := []metav1.LabelSelector{{MatchLabels: map[string]string{"rack": "r1"}}}
	rack2 := []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "rack", Operator: metav1.LabelSelectorOpIn, Values: []string{"r2", "r3"}}}}}
	peers := []*BGPPeer{
		peer("tor1", BGPPeerSpec{MyASN: 64513, ASN: 64512, Address: "10.1.0.1", NodeSelectors: rack1}),
		peer("tor2", BGPPeerSpec{MyASN: 64513, ASN: 64512, Address: "10.2.0.1", NodeSelectors: rack2}),
		peer("rr", BGPPeerSpec{MyASN: 64513, ASN: 64513, Address: "10.0.0.1"}),
		peer("rr-again", BGPPeerSpec{MyASN: 64513, ASN: 64513, Address: "10.0.0.1", NodeSelectors: rack2}),
	}
	for _, tc := range []struct {
		node  *corev1.Node
		want  []string
		nEvts int
	}{
		{node("a", map[string]string{"rack": "r1"}), []string{"10.0.0.1", "10.1.0.1"}, 0},
		{node("b", map[string]string{"rack": "r3"}), []string{"10.0.0.1", "10.2.0.1"}, 1},
		{node("c", nil), []string{"10.0.0.1"}, 0},
	} {
		got, evs := Peers(tc.node, routerID, peers, nil)
		var addrs []string
		for _, p := range got {
			addrs = append(addrs, p.Address.String())
		}
		if !reflect.DeepEqual(addrs, tc.want) || len(evs) != tc.nEvts {
			t.Errorf("node %s: peers %v events %v, want %v and %d events", tc.node.Name, addrs, evs, tc.want, tc.nEvts)
		}
	}
}

func TestFromUnstructured(t *testing.T) {
	good := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
		"metadata": map[string]any{"name": "tor", "namespace": "metallb-system"},
		"spec":     map[string]any{"myASN": int64(64513), "peerASN": int64(64512), "peerAddress": "172.18.0.1", "holdTime": "9s", "bfdProfile": "fast"},
	}}
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
		"metadata": map[string]any{"name": "bad", "namespace": "metallb-system"},
		"spec":     map[string]any{"myASN": "many"},
	}}
	prof := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "BFDProfile",
		"metadata": map[string]any{"name": "fast", "namespace": "metallb-system"},
		"spec":     map[string]any{"transmitInterval": int64(100), "receiveInterval": int64(100)},
	}}
	peers, profiles, evs := FromUnstructured([]*unstructured.Unstructured{good, bad}, []*unstructured.Unstructured{prof})
	if len(peers) != 1 || len(profiles) != 1 || len(evs) != 1 || evs[0].Object.Name != "bad" {
		t.Fatalf("peers %d profiles %d events %v", len(peers), len(profiles), evs)
	}
	got, evs := Peers(node("n", nil), routerID, peers, profiles)
	want := []bgp.Peer{{Address: netip.MustParseAddr("172.18.0.1"), ASN: 64512, LocalASN: 64513, HoldTime: 9 * time.Second,
		Keepalive: 3 * time.Second, DisableGracefulRestart: true,
		BFD: bgp.BFD{Enabled: true, Interval: 100 * time.Millisecond, ReceiveInterval: 100 * time.Millisecond, Multiplier: 3}}}
	if len(evs) != 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v, want %+v", got, evs, want)
	}
}
