// Command ovncni is a minimal CNI plugin that plugs pods into OVN the way
// OVN-Kubernetes does, embedding ovnedge's NB model (ovsdbnb/nbdb) with
// libovsdb: kubelet-run pods on an OVN chassis get a logical switch port
// on their node's switch and so can be Service backends on OVN.
//
// ADD delegates IPAM (host-local, say), makes a veth whose host end
// ovn<first 12 chars of the container ID> joins the bridge (br-int) with
// external_ids:iface-id=<lsp>, gives the pod end the MAC OVN-Kubernetes
// derives from the IPv4 address (0a:58:<the address's 4 bytes>), creates
// the Logical_Switch_Port <namespace>_<pod> (addresses and port_security
// "<MAC> <IPs>") on the configured switch, and waits until ovn-controller
// has bound it (its up column). DEL undoes each step and tolerates what
// is already gone; CHECK does nothing.
//
// One plugin entry of a conflist configures it (nbAddress and
// logicalSwitch are required; ovsdb, bridge and mtu show their defaults):
//
//	{"cniVersion": "1.0.0", "name": "ovn", "type": "ovncni",
//	 "nbAddress": "tcp:10.89.0.1:6641",
//	 "ovsdb": "unix:/run/openvswitch/db.sock",
//	 "bridge": "br-int", "logicalSwitch": "ovn-worker", "mtu": 1400,
//	 "ipam": {"type": "host-local",
//	   "ranges": [[{"subnet": "10.244.1.0/24", "rangeStart": "10.244.1.128",
//	     "rangeEnd": "10.244.1.250", "gateway": "10.244.1.1"}]],
//	   "routes": [{"dst": "0.0.0.0/0"}]}}
//
// nbAddress is a libovsdb endpoint (tcp: or unix:; several separated by
// commas for a RAFT cluster). Install: go build -o /opt/cni/bin/ovncni
// ./examples/ovncni (the CNI bin dir, next to host-local) and put the
// conflist in /etc/cni/net.d; the node needs ovs-vsctl on the runtime's
// PATH.
//
// Deviation from OVN-Kubernetes (go-controller/pkg/cni/ in
// github.com/ovn-kubernetes/ovn-kubernetes at 8871cd9, the MAC and port name from
// util.IPAddrToHWAddr and util.GetLogicalPortName in
// go-controller/pkg/util/): there ovnkube-controller allocates the
// address, writes the logical switch port and the pod annotation
// k8s.ovn.org/pod-networks, and the CNI shim asks ovnkube-node, which
// plugs the veth from that annotation. Here the plugin allocates by
// delegating to an IPAM plugin and writes the port itself; there is no
// annotation and no daemon.
package main
