package ovnknode

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// More annotations of OVN-Kubernetes' and Kube-OVN's nodes.
const (
	// AnnotationChassisID names the node's chassis (its system-id).
	AnnotationChassisID = "k8s.ovn.org/node-chassis-id"
	// AnnotationKubeOVNChassis is Kube-OVN's name of the node's chassis,
	// read when OVN-Kubernetes' is missing.
	AnnotationKubeOVNChassis = "ovn.kubernetes.io/chassis"
	// AnnotationL3Gateway describes the node's gateway; its "default"
	// network's "mac-address" is the bridge MAC.
	AnnotationL3Gateway = "k8s.ovn.org/l3-gateway-config"
)

// Chassis is n's chassis: OVN-Kubernetes' node-chassis-id, else
// Kube-OVN's chassis annotation ("" when neither).
func Chassis(n *corev1.Node) string {
	if c := n.Annotations[AnnotationChassisID]; c != "" {
		return c
	}
	return n.Annotations[AnnotationKubeOVNChassis]
}

// StatusIPs returns a node's InternalIP and ExternalIP addresses.
func StatusIPs(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// Ready reports whether n's Ready condition is true.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// HasAnnotations reports whether n carries any of OVN-Kubernetes'
// k8s.ovn.org/ annotations.
func HasAnnotations(n *corev1.Node) bool {
	for k := range n.Annotations {
		if strings.HasPrefix(k, "k8s.ovn.org/") {
			return true
		}
	}
	return false
}

// L3GatewayMAC is the bridge MAC in n's l3-gateway-config annotation.
func L3GatewayMAC(n *corev1.Node) (net.HardwareAddr, error) {
	v, ok := n.Annotations[AnnotationL3Gateway]
	if !ok {
		return nil, fmt.Errorf("no bridge MAC: neither --bridge-mac, the bridge's mac_in_use nor the %s annotation", AnnotationL3Gateway)
	}
	var cfg map[string]struct {
		MAC string `json:"mac-address"`
	}
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationL3Gateway, err)
	}
	v = strings.TrimSpace(cfg["default"].MAC)
	if v == "" {
		return nil, fmt.Errorf("annotation %s: no default mac-address", AnnotationL3Gateway)
	}
	mac, err := net.ParseMAC(v)
	if err == nil && len(mac) != 6 {
		err = fmt.Errorf("%s is not a 6-byte MAC address", v)
	}
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationL3Gateway, err)
	}
	return mac, nil
}
