package metallb

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ovnedge/ovnedge/bgp"
	"github.com/ovnedge/ovnedge/event"
)

// The resources this package reads.
var (
	BGPPeerResource    = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta2", Resource: "bgppeers"}
	BFDProfileResource = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bfdprofiles"}
)

// ReasonInvalid is the reason of the events about objects that cannot be
// used.
const ReasonInvalid = "BGPPeerInvalid"

// BGPPeer is the part of MetalLB's BGPPeer (metallb.io/v1beta2) that
// ovnedge reads.
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BGPPeerSpec `json:"spec,omitempty"`
}

// BGPPeerSpec mirrors MetalLB's field names.
type BGPPeerSpec struct {
	MyASN                 uint32                 `json:"myASN"`
	ASN                   uint32                 `json:"peerASN,omitempty"`
	DynamicASN            string                 `json:"dynamicASN,omitempty"`
	Address               string                 `json:"peerAddress"`
	SrcAddress            string                 `json:"sourceAddress,omitempty"`
	Port                  uint16                 `json:"peerPort,omitempty"`
	HoldTime              *metav1.Duration       `json:"holdTime,omitempty"`
	KeepaliveTime         *metav1.Duration       `json:"keepaliveTime,omitempty"`
	ConnectTime           *metav1.Duration       `json:"connectTime,omitempty"`
	RouterID              string                 `json:"routerID,omitempty"`
	NodeSelectors         []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
	Password              string                 `json:"password,omitempty"`
	PasswordSecret        corev1.SecretReference `json:"passwordSecret,omitempty"`
	BFDProfile            string                 `json:"bfdProfile,omitempty"`
	EnableGracefulRestart bool                   `json:"enableGracefulRestart,omitempty"`
	EBGPMultiHop          bool                   `json:"ebgpMultiHop,omitempty"`
	VRFName               string                 `json:"vrf,omitempty"`
	DisableMP             bool                   `json:"disableMP,omitempty"`
}

// BFDProfile is the part of MetalLB's BFDProfile (metallb.io/v1beta1)
// that ovnedge reads; intervals are in milliseconds.
type BFDProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BFDProfileSpec `json:"spec,omitempty"`
}

// BFDProfileSpec mirrors MetalLB's field names.
type BFDProfileSpec struct {
	ReceiveInterval  *uint32 `json:"receiveInterval,omitempty"`
	TransmitInterval *uint32 `json:"transmitInterval,omitempty"`
	DetectMultiplier *uint32 `json:"detectMultiplier,omitempty"`
	EchoInterval     *uint32 `json:"echoInterval,omitempty"`
	EchoMode         *bool   `json:"echoMode,omitempty"`
	PassiveMode      *bool   `json:"passiveMode,omitempty"`
	MinimumTTL       *uint32 `json:"minimumTtl,omitempty"`
}

// FromUnstructured converts objects of a dynamic client or informer; an
// object that does not convert gets an event and is left out.
func FromUnstructured(peers, profiles []*unstructured.Unstructured) ([]*BGPPeer, []*BFDProfile, []event.Event) {
	var evs []event.Event
	outP := make([]*BGPPeer, 0, len(peers))
	for _, u := range peers {
		p := &BGPPeer{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
			evs = append(evs, event.Warningf(event.Ref("metallb.io/v1beta2", "BGPPeer", u), ReasonInvalid, "not a BGPPeer: %v", err))
			continue
		}
		outP = append(outP, p)
	}
	outB := make([]*BFDProfile, 0, len(profiles))
	for _, u := range profiles {
		b := &BFDProfile{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
			evs = append(evs, event.Warningf(event.Ref("metallb.io/v1beta1", "BFDProfile", u), ReasonInvalid, "not a BFDProfile: %v", err))
			continue
		}
		outB = append(outB, b)
	}
	return outP, outB, evs
}

// Peers returns the peers node should run: those of peers whose
// nodeSelectors match the node, with the BFD settings of the profile they
// name (profiles are looked up by name among profiles). routerID is the
// node's BGP identifier: a BGPPeer asking for another one is refused.
// Peers are sorted by address; every object that cannot be used, whether
// it selects this node or not, gets one event.
func Peers(node *corev1.Node, routerID netip.Addr, peers []*BGPPeer, profiles []*BFDProfile) ([]bgp.Peer, []event.Event) {
	var evs []event.Event
	bfd := map[string]bgp.BFD{}
	for _, p := range profiles {
		b, err := bfdFrom(p)
		if err != nil {
			evs = append(evs, event.Warningf(event.Ref("metallb.io/v1beta1", "BFDProfile", p), ReasonInvalid, "BFD profile %s: %v", p.Name, err))
			continue
		}
		bfd[p.Name] = b
	}
	sorted := slices.Clone(peers)
	slices.SortFunc(sorted, func(a, b *BGPPeer) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var nodeLabels labels.Set
	if node != nil {
		nodeLabels = node.Labels
	}
	var out []bgp.Peer
	first := map[netip.Addr]string{}
	for _, p := range sorted {
		ref := event.Ref("metallb.io/v1beta2", "BGPPeer", p)
		bp, sels, err := peerFrom(p, routerID, bfd)
		if err != nil {
			evs = append(evs, event.Warningf(ref, ReasonInvalid, "BGP peer %s: %v", p.Name, err))
			continue
		}
		if node == nil || !slices.ContainsFunc(sels, func(s labels.Selector) bool { return s.Matches(nodeLabels) }) {
			continue
		}
		if other, dup := first[bp.Address]; dup {
			evs = append(evs, event.Warningf(ref, ReasonInvalid, "BGP peer %s: address %v already used by BGPPeer %s on node %s",
				p.Name, bp.Address, other, node.Name))
			continue
		}
		first[bp.Address] = p.Name
		out = append(out, bp)
	}
	slices.SortFunc(out, func(a, b bgp.Peer) int { return a.Address.Compare(b.Address) })
	return out, evs
}

// peerFrom validates p as MetalLB does and converts it.
func peerFrom(p *BGPPeer, routerID netip.Addr, bfd map[string]bgp.BFD) (bgp.Peer, []labels.Selector, error) {
	s := p.Spec
	switch {
	case s.MyASN == 0:
		return bgp.Peer{}, nil, errors.New("missing local ASN")
	case s.DynamicASN != "":
		return bgp.Peer{}, nil, errors.New("dynamicASN is not supported by ovnedge: set peerASN")
	case s.ASN == 0:
		return bgp.Peer{}, nil, errors.New("missing peer ASN")
	case s.ASN == s.MyASN && s.EBGPMultiHop:
		return bgp.Peer{}, nil, errors.New("invalid ebgp-multihop parameter set for an ibgp peer")
	case s.VRFName != "":
		return bgp.Peer{}, nil, fmt.Errorf("vrf %q is not supported by ovnedge", s.VRFName)
	case s.PasswordSecret.Name != "" && s.Password != "":
		return bgp.Peer{}, nil, errors.New("can not have both password and secret ref set")
	case s.PasswordSecret.Name != "":
		return bgp.Peer{}, nil, errors.New("passwordSecret is not supported by ovnedge (its node agent reads no Secrets): set password")
	}
	addr, err := netip.ParseAddr(s.Address)
	if err != nil {
		return bgp.Peer{}, nil, fmt.Errorf("invalid BGPPeer address %q", s.Address)
	}
	out := bgp.Peer{Address: addr.Unmap(), ASN: s.ASN, LocalASN: s.MyASN, Port: s.Port, Password: s.Password,
		DisableGracefulRestart: !s.EnableGracefulRestart}
	if s.SrcAddress != "" {
		if out.LocalAddress, err = netip.ParseAddr(s.SrcAddress); err != nil {
			return bgp.Peer{}, nil, fmt.Errorf("invalid source IP %q", s.SrcAddress)
		}
	}
	if s.RouterID != "" {
		id, err := netip.ParseAddr(s.RouterID)
		if err != nil {
			return bgp.Peer{}, nil, fmt.Errorf("invalid router ID %q", s.RouterID)
		}
		if id != routerID {
			return bgp.Peer{}, nil, fmt.Errorf("router ID %v differs from the node's %v: ovnedge runs one identifier per node (--bgp-router-id)", id, routerID)
		}
	}
	if out.HoldTime, out.Keepalive, err = timers(s.HoldTime, s.KeepaliveTime); err != nil {
		return bgp.Peer{}, nil, fmt.Errorf("invalid BGPPeer timers: %w", err)
	}
	if s.ConnectTime != nil {
		ct := s.ConnectTime.Duration
		if ct < time.Second || ct > 65535*time.Second || ct%time.Second != 0 {
			return bgp.Peer{}, nil, fmt.Errorf("connect time %v: a whole number of seconds between 1s and 65535s", ct)
		}
		out.ConnectRetry = ct
	}
	if s.EBGPMultiHop {
		out.Multihop = 255
	}
	if s.BFDProfile != "" {
		b, ok := bfd[s.BFDProfile]
		if !ok {
			return bgp.Peer{}, nil, fmt.Errorf("BFD profile %q not found", s.BFDProfile)
		}
		out.BFD = b
	}
	sels, err := selectors(s.NodeSelectors)
	if err != nil {
		return bgp.Peer{}, nil, err
	}
	return out, sels, nil
}

// timers follows MetalLB's parseTimers: either value defaults from the
// other (keepalive = hold/3, hold = 3 x keepalive); hold is 0 or at
// least 3 s; keepalive at most hold. Neither set leaves both 0 (the
// speaker's defaults).
func timers(ht, ka *metav1.Duration) (hold, keepalive time.Duration, err error) {
	switch {
	case ht == nil && ka == nil:
		return 0, 0, nil
	case ht != nil && ka != nil:
		hold, keepalive = ht.Duration, ka.Duration
	case ht != nil:
		hold, keepalive = ht.Duration, ht.Duration/3
	default:
		hold, keepalive = 3*ka.Duration, ka.Duration
	}
	if rounded := hold.Truncate(time.Second); rounded != 0 && rounded < 3*time.Second {
		return 0, 0, fmt.Errorf("invalid hold time %v: must be 0 or >=3s", hold)
	}
	if keepalive > hold {
		return 0, 0, fmt.Errorf("invalid keepaliveTime %v, must be lower than holdTime %v", keepalive, hold)
	}
	return hold, keepalive, nil
}

// selectors converts nodeSelectors; none selects every node. Two equal
// selectors are refused, as in MetalLB.
func selectors(in []metav1.LabelSelector) ([]labels.Selector, error) {
	if len(in) == 0 {
		return []labels.Selector{labels.Everything()}, nil
	}
	out := make([]labels.Selector, 0, len(in))
	seen := map[string]bool{}
	for i := range in {
		s, err := metav1.LabelSelectorAsSelector(&in[i])
		if err != nil {
			return nil, fmt.Errorf("node selector: %w", err)
		}
		if seen[s.String()] {
			return nil, fmt.Errorf("duplicate definition of nodeSelectors %q", s.String())
		}
		seen[s.String()] = true
		out = append(out, s)
	}
	return out, nil
}

// bfdFrom converts a profile with MetalLB's ranges (intervals 10-60000
// ms, multiplier 2-255; defaults 300 ms and 3).
func bfdFrom(p *BFDProfile) (bgp.BFD, error) {
	get := func(v *uint32, def, lo, hi uint32, what string) (uint32, error) {
		if v == nil {
			return def, nil
		}
		if *v < lo || *v > hi {
			return 0, fmt.Errorf("invalid %s value %d: out of range %d-%d", what, *v, lo, hi)
		}
		return *v, nil
	}
	rx, err1 := get(p.Spec.ReceiveInterval, 300, 10, 60000, "receive interval")
	tx, err2 := get(p.Spec.TransmitInterval, 300, 10, 60000, "transmit interval")
	mult, err3 := get(p.Spec.DetectMultiplier, 3, 2, 255, "detect multiplier")
	if err := errors.Join(err1, err2, err3); err != nil {
		return bgp.BFD{}, err
	}
	return bgp.BFD{Enabled: true, Interval: time.Duration(tx) * time.Millisecond,
		ReceiveInterval: time.Duration(rx) * time.Millisecond, Multiplier: int(mult)}, nil
}
