// Package agent is the configuration of `ovnedge lbsvc-agent`, the in-pod
// agent of Kube-OVN's LoadBalancer Services (package pod runs it): the
// LoadBalancer address and gateway (from flags, or from the pod's Kube-OVN
// annotations through a downward-API file), the ClusterIP and the ports to
// forward. A Config is flag-friendly (Config.RegisterFlags, Config.Args):
// the leader writes an lb-svc Deployment's command line with Args, the
// agent parses it with RegisterFlags. It is pure: it builds on any OS and
// links no netlink or nftables code.
package agent
