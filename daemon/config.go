package daemon

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/gcfg.v1"

	"github.com/ovnedge/ovnedge/bgp"
	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/egress/reach"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
	"github.com/ovnedge/ovnedge/metrics"
)

// ClusterSubnet is one `--cluster-subnets` entry: a pod network and the
// prefix length of each node's share of it.
type ClusterSubnet struct {
	CIDR       netip.Prefix
	HostPrefix int
}

// Config is everything the daemon is told. Values come from defaults, then
// the `--config-file` (gcfg/ini), then flags: a flag given on the command
// line wins over the file.
type Config struct {
	ConfigFile string
	NodeName   string
	Kubeconfig string
	// KubeAPIQPS and KubeAPIBurst are the API clients' rate limit
	// (client-go's default, 5 and 10, writes a thousand EgressIP statuses
	// in over three minutes).
	KubeAPIQPS   float32
	KubeAPIBurst int
	Manifests    string
	// ManifestsPoll is how often the manifests directory is checked.
	ManifestsPoll time.Duration

	ClusterSubnets []ClusterSubnet
	// JoinSubnet and JoinSubnet6 are the join switch's IPv4 and IPv6
	// subnets (OVN-Kubernetes' [gateway] v4-join-subnet, v6-join-subnet).
	JoinSubnet, JoinSubnet6 netip.Prefix
	// MasqueradeSubnetV4 and MasqueradeSubnetV6 are OVN-Kubernetes'
	// masquerade subnets (--gateway-v4-masquerade-subnet,
	// --gateway-v6-masquerade-subnet): hairpin_snat_ip is their .5, the
	// ETP=Local NodePort VIP on the node switches their .3.
	MasqueradeSubnetV4, MasqueradeSubnetV6 netip.Prefix
	// LBTemplates serves NodePorts with OVN-Kubernetes' template load
	// balancers (Chassis_Template_Var, OVN 22.12+): one per Service,
	// protocol and family; false gives every node its own.
	LBTemplates bool
	// LBSourceRanges enforces LoadBalancer Services'
	// spec.loadBalancerSourceRanges in OVN (lbsvc.Options.SourceRanges).
	LBSourceRanges bool
	// OVNEmptyLBEvents is OVN-Kubernetes' --ovn-empty-lb-events
	// (unidling): idled Services' load balancers raise events, which
	// the leader turns into NeedPods events (needs --sb-address).
	OVNEmptyLBEvents bool

	// Northbound database: endpoints (several for RAFT) and TLS files.
	NBAddress               []string
	NBPrivKey, NBCert, NBCA string
	// SBAddress are the OVN Southbound endpoints: the leader waits there
	// for the new egress node's chassis to have installed its SNAT before
	// the reroute moves (make-before-break); none skips the wait. ssl:
	// endpoints use the Northbound's TLS files.
	SBAddress []string

	OVSDB     string // Open_vSwitch database endpoint
	OVSRunDir string // directory of <bridge>.mgmt
	Bridge    string
	// Uplink is the bridge port of the physical NIC; PatchPort the patch
	// port to br-int ("" means OVN-Kubernetes' name,
	// patch-<bridge>_<node>-to-br-int).
	Uplink, PatchPort string
	CTZone            uint16

	// HostNetns is the network namespace (a path) whose links host the
	// egress IPs of secondary host networks; "" is ovnedge's own.
	HostNetns string

	// LBPools are the LoadBalancer address pools; none disables LB IPAM
	// (Services keep the ingress they have).
	LBPools []*ipam.Pool
	// LBClass is the spec.loadBalancerClass of the Services LBPools
	// serve (empty: Services without a class).
	LBClass string

	// EgressIP reachability, as OVN-Kubernetes names it.
	ReachabilityTotalTimeout int // seconds; 0 = always reachable
	HealthCheckPort          int // 0 = DISCARD probe, else gRPC
	CheckInterval            time.Duration
	// AgentRestartGrace is how long a node whose gRPC health port refuses
	// connections (its agent restarting) stays reachable.
	AgentRestartGrace time.Duration
	// FastFailover adds the heartbeat detector (egress/reach.Heartbeat):
	// the leader heartbeats the egress nodes, and with L2 announce every
	// node heartbeats the others, each HeartbeatInterval on UDP
	// HeartbeatPort; HeartbeatMisses missed answers mark a node down.
	FastFailover      bool
	HeartbeatInterval time.Duration
	HeartbeatMisses   int
	HeartbeatPort     int
	// HeartbeatKeyFile holds the heartbeats' shared HMAC key (a
	// Secret's key, mounted); "" sends them unauthenticated.
	HeartbeatKeyFile string
	// HostLease is how long a node keeps its egress IPs on host
	// interfaces once it hears neither the leader's heartbeat nor the API
	// server; 0 keeps them regardless.
	HostLease time.Duration
	// HostBackend is the SNAT backend of egress IPs on host interfaces:
	// "iptables", "nftables" or "auto".
	HostBackend string
	// HostGuard drops pod packets leaving a secondary host network
	// unSNATed (desired.Params.HostGuard).
	HostGuard bool

	EnableEgressIP bool
	// EnableEgressService runs k8s.ovn.org/v1 EgressServices.
	EnableEgressService bool
	EnableL2Announce    bool
	// GatewayFlows programs the shared gateway's base and Service flows
	// on the bridge; off where OVN-Kubernetes' node agent installs them.
	GatewayFlows bool
	// BridgeMAC is the bridge's MAC address; nil reads it from the
	// Open_vSwitch database (the bridge interface's mac_in_use).
	BridgeMAC net.HardwareAddr

	// EnableLBSvc runs Kube-OVN's LoadBalancer Services on the
	// leader: Services annotated ovn.kubernetes.io/attachmentprovider get
	// their address from the provider's Subnet and an lb-svc-<service>
	// Deployment running `ovnedge lbsvc-agent`. It watches Kube-OVN's
	// Subnets and NetworkAttachmentDefinitions, whose CRDs must exist.
	EnableLBSvc bool
	// LBSvcImage is the image of the lb-svc Deployments; "" takes the
	// key image of ConfigMap kube-system/ovn-vpc-nat-config.
	LBSvcImage string

	// Kube-OVN underlay subnets with enableExternalLBAddress (Kube-OVN's
	// MetalLB integration).
	// UnderlayLBMode is UnderlayOff, UnderlayMetalLB (MetalLB assigns
	// and announces the VIPs; ovnedge programs them) or
	// UnderlayStandalone (ovnedge also allocates them from the Subnets'
	// excludeIps and answers ARP for them on UnderlayInterface).
	UnderlayLBMode string
	// PreferLocal and LSCtSkipDstLportIPs are kube-ovn-controller's
	// --enable-ovn-lb-prefer-local and --ls-ct-skip-dst-lport-ips.
	PreferLocal, LSCtSkipDstLportIPs bool
	// ProviderBridge is the node's provider bridge (Kube-OVN's
	// br-<provider network>), ProviderNIC its underlay NIC port and
	// ProviderVLAN, when not 0, the VLAN its steering flows match; ""
	// installs no steering flows.
	ProviderBridge, ProviderNIC string
	ProviderVLAN                int
	// UnderlayInterface is the host interface on the underlay VLAN that
	// answers ARP for the node's underlay VIPs (standalone mode; MetalLB's
	// interface, e.g. underlay0.341).
	UnderlayInterface string

	// LeaderElect campaigns for the Lease and runs the cluster-wide
	// work when elected; off for node-only instances (the DaemonSet).
	LeaderElect bool
	// LeaderStepDown is how long a leader's cluster pass may keep failing
	// (an NB it cannot reach) before it releases the Lease for another
	// candidate; 0 never.
	LeaderStepDown time.Duration
	// LeaderAvoidEgressNodes has a leader on an egress-assignable node
	// hand the Lease to a Ready candidate on a node that is not
	// (handoff.Successor), so that an egress node's death never waits for the
	// Lease to expire.
	LeaderAvoidEgressNodes bool
	// LeaseDuration, LeaseRenewDeadline and LeaseRetryPeriod time the
	// Lease's election (OVN-Kubernetes' cluster manager HA flags): a dead
	// leader is replaced within LeaseDuration of its last renewal.
	LeaseDuration, LeaseRenewDeadline, LeaseRetryPeriod time.Duration

	// BGP announces the VIPs a node can serve (and, with BGPEgressIPs,
	// the egress IPs assigned to it) to its BGP peers: see package bgp.
	EnableBGP, BGPEgressIPs bool
	BGPASN                  uint32
	// BGPRouterID is the BGP identifier; invalid means the node's IPv4
	// address.
	BGPRouterID netip.Addr
	// BGPPeers are the peers' addresses; all have BGPPeerASN and port
	// BGPPeerPort.
	BGPPeers    []netip.Addr
	BGPPeerASN  uint32
	BGPPeerPort uint16
	// BGPListenPort, when not 0, also accepts sessions the routers open
	// (on the node's addresses): a router retrying every second brings a
	// restarted node's session up sooner than GoBGP's first attempt
	// (1.5-2 s).
	BGPListenPort int
	BGPHoldTime   time.Duration
	// BGPBFD runs BFD with every peer, a packet every BGPBFDInterval, down
	// after BGPBFDMultiplier missed.
	BGPBFD           bool
	BGPBFDInterval   time.Duration
	BGPBFDMultiplier int
	// BGPGracefulRestart is the restart time advertised (0: off).
	BGPGracefulRestart time.Duration
	// BGPCommunities and BGPLocalPref are per LB pool (by name).
	BGPCommunities map[string][]bgp.Community
	BGPLocalPref   map[string]uint32
	// BGPPeerCRDs also takes peers from MetalLB's BGPPeer and BFDProfile
	// objects in BGPCRDNamespace (package bgp/metallb).
	BGPPeerCRDs     bool
	BGPCRDNamespace string
	// BGPShutdown says how a stopping node instance leaves its peers:
	// "restart" (graceful restart: peers keep the routes), "withdraw"
	// (routes withdrawn, sessions closed with a Cease) or "auto"
	// (withdraw when the node is leaving: cordoned, being deleted or out
	// of service; restart otherwise).
	BGPShutdown string

	MetricsAddr string
	// MetricsSecure serves /metrics over HTTPS (MetricsCertFile and
	// MetricsKeyFile, or a self-signed certificate) to the clients whose
	// bearer token the API server authenticates and authorizes for get on
	// the non-resource URL /metrics.
	MetricsSecure                   bool
	MetricsCertFile, MetricsKeyFile string
	// HealthAddr serves /healthz and /readyz alone; empty: on a plain
	// MetricsAddr.
	HealthAddr string
	Pprof      bool
	// PprofAddr serves /debug/pprof/ with Pprof, on loopback only; empty:
	// on MetricsAddr when that is a plain loopback address.
	PprofAddr string
	// GCAhead starts a garbage collection after a cluster pass when the
	// runtime would start its next one late, on the next pass (see
	// package gcahead).
	GCAhead bool
	// FullRecompute is how often the leader checks its incremental
	// desired state against a full recompute (see Dataplane.Audit).
	FullRecompute time.Duration
	// LogLevel is the lowest level logged.
	LogLevel slog.Level
}

// option is one setting: its flag, its place in the config file and how to
// store a value.
type option struct {
	name, section, key, def, usage string
	set                            func(c *Config, v string) error
}

var options = []option{
	{"config-file", "", "", "", "gcfg/ini configuration file; flags override it",
		func(c *Config, v string) error { c.ConfigFile = v; return nil }},
	{"node-name", "ovnedge", "node-name", "", "this node's Kubernetes name (node work runs for it only)",
		func(c *Config, v string) error { c.NodeName = v; return nil }},
	{"kubeconfig", "kubernetes", "kubeconfig", "", "kubeconfig file of the API server; empty: in-cluster config",
		func(c *Config, v string) error { c.Kubeconfig = v; return nil }},
	{"kube-api-qps", "kubernetes", "kube-api-qps", "200",
		"requests per second to the API server (the client's rate limit; client-go's own 5 writes a thousand EgressIP statuses in over three minutes)",
		func(c *Config, v string) error {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
			if err != nil || q <= 0 || q > 100000 {
				return fmt.Errorf("%q: want a number of requests per second above 0", v)
			}
			c.KubeAPIQPS = float32(q)
			return nil
		}},
	{"ovn-empty-lb-events", "kubernetes", "ovn-empty-lb-events", "false",
		"unidling, as OVN-Kubernetes' flag: an idled Service's (*/idled-at) load balancers raise an event instead of rejecting, and the leader turns the Southbound's Controller_Event rows into NeedPods events and keeps k8s.ovn.org/unidled-at (needs --sb-address)",
		func(c *Config, v string) (err error) { c.OVNEmptyLBEvents, err = strconv.ParseBool(v); return err }},
	{"kube-api-burst", "kubernetes", "kube-api-burst", "400", "requests to the API server allowed at once above --kube-api-qps",
		func(c *Config, v string) (err error) { c.KubeAPIBurst, err = parseUint(v, 1, 100000); return err }},
	{"manifests", "ovnedge", "manifests", "", "read Kubernetes objects from YAML files in this directory instead of an API server",
		func(c *Config, v string) error { c.Manifests = v; return nil }},
	{"manifests-poll", "ovnedge", "manifests-poll", "500ms", "how often the --manifests directory is checked for changes",
		func(c *Config, v string) (err error) { c.ManifestsPoll, err = parseDuration(v); return err }},
	{"cluster-subnets", "default", "cluster-subnets", "10.128.0.0/14/23", "pod networks, comma-separated CIDR[/hostPrefix]",
		func(c *Config, v string) (err error) { c.ClusterSubnets, err = ParseClusterSubnets(v); return err }},
	{"join-subnet", "gateway", "v4-join-subnet", "100.64.0.0/16", "subnet of the join switch between ovn_cluster_router and the gateway routers",
		func(c *Config, v string) (err error) { c.JoinSubnet, err = parseFamilySubnet(v, false); return err }},
	{"v6-join-subnet", "gateway", "v6-join-subnet", "fd98::/64", "IPv6 subnet of the join switch (used where the cluster subnets include IPv6)",
		func(c *Config, v string) (err error) { c.JoinSubnet6, err = parseFamilySubnet(v, true); return err }},
	{"gateway-v4-masquerade-subnet", "gateway", "v4-masquerade-subnet", "169.254.169.0/29",
		"OVN-Kubernetes' v4 masquerade subnet (hairpin_snat_ip is its .5, the ETP=Local NodePort VIP its .3); at least a /29",
		func(c *Config, v string) (err error) {
			c.MasqueradeSubnetV4, err = parseMasquerade(v, false)
			return err
		}},
	{"gateway-v6-masquerade-subnet", "gateway", "v6-masquerade-subnet", "fd69::/125",
		"OVN-Kubernetes' v6 masquerade subnet (hairpin_snat_ip is its ::5, the ETP=Local NodePort VIP its ::3); at least a /125",
		func(c *Config, v string) (err error) {
			c.MasqueradeSubnetV6, err = parseMasquerade(v, true)
			return err
		}},
	{"lb-templates", "ovnedge", "lb-templates", "true",
		"serve NodePorts with template load balancers (Chassis_Template_Var, OVN 22.12+), one per Service, protocol and family, as OVN-Kubernetes does; false: per-node load balancers",
		func(c *Config, v string) (err error) { c.LBTemplates, err = strconv.ParseBool(v); return err }},
	{"lb-source-ranges", "ovnedge", "lb-source-ranges", "true",
		"enforce LoadBalancer Services' spec.loadBalancerSourceRanges as kube-proxy does (drop ACLs on the nodes' switches, br-ex flows for host-network endpoints); OVN-Kubernetes ignores the field",
		func(c *Config, v string) (err error) { c.LBSourceRanges, err = strconv.ParseBool(v); return err }},
	{"nb-address", "ovnnorth", "address", "", "OVN Northbound endpoints, comma-separated (unix:, tcp:, ssl:); several for a RAFT cluster",
		func(c *Config, v string) error { c.NBAddress = splitList(v); return nil }},
	{"sb-address", "ovnsouth", "address", "", "OVN Southbound endpoints, comma-separated: the leader waits for the new egress node's chassis to install its SNAT before moving a reroute (empty: no wait)",
		func(c *Config, v string) error { c.SBAddress = splitList(v); return nil }},
	{"nb-client-privkey", "ovnnorth", "client-privkey", "", "TLS private key for ssl: endpoints",
		func(c *Config, v string) error { c.NBPrivKey = v; return nil }},
	{"nb-client-cert", "ovnnorth", "client-cert", "", "TLS certificate for ssl: endpoints",
		func(c *Config, v string) error { c.NBCert = v; return nil }},
	{"nb-client-cacert", "ovnnorth", "client-cacert", "", "TLS CA certificate for ssl: endpoints",
		func(c *Config, v string) error { c.NBCA = v; return nil }},
	{"ovs-db", "ovnedge", "ovs-db", "unix:/var/run/openvswitch/db.sock", "Open_vSwitch database endpoint",
		func(c *Config, v string) error { c.OVSDB = v; return nil }},
	{"ovs-rundir", "ovnedge", "ovs-rundir", "/var/run/openvswitch", "directory holding the bridges' OpenFlow sockets (<bridge>.mgmt)",
		func(c *Config, v string) error { c.OVSRunDir = v; return nil }},
	{"bridge", "ovnedge", "bridge", "br-ex", "the external bridge (br-ex or breth0)",
		func(c *Config, v string) error { c.Bridge = v; return nil }},
	{"uplink", "ovnedge", "uplink", "", "the bridge port of the physical NIC; empty: found from the bridge as ovnkube-node finds it (render: eth0)",
		func(c *Config, v string) error { c.Uplink = v; return nil }},
	{"patch-port", "ovnedge", "patch-port", "", "the bridge's patch port to br-int; empty: patch-<bridge>_<node>-to-br-int",
		func(c *Config, v string) error { c.PatchPort = v; return nil }},
	{"host-netns", "ovnedge", "host-netns", "", "network namespace (path) holding the node's host links for egress IPs on secondary host networks; empty: ovnedge's own",
		func(c *Config, v string) error { c.HostNetns = v; return nil }},
	{"lb-pools", "ovnedge", "lb-pools", "", "LoadBalancer IP pools, comma-separated NAME=CIDR; empty disables LB IPAM",
		func(c *Config, v string) (err error) { c.LBPools, err = ParseLBPools(v); return err }},
	{"lb-class", "ovnedge", "lb-class", "",
		"spec.loadBalancerClass of the Services --lb-pools assigns addresses to; empty: Services without a class (none with --underlay-lb-mode=metallb, where those are MetalLB's)",
		func(c *Config, v string) error { c.LBClass = v; return nil }},
	{"conntrack-zone", "ovnedge", "conntrack-zone", "64000", "conntrack zone of the bridge's host and egress traffic",
		func(c *Config, v string) error { n, err := parseUint(v, 1, 65535); c.CTZone = uint16(n); return err }},
	{"egressip-reachability-total-timeout", "ovnkubernetesfeature", "egressip-reachability-total-timeout", "1",
		"seconds an egress node may take to answer a reachability check; 0 treats every node as reachable",
		func(c *Config, v string) (err error) {
			c.ReachabilityTotalTimeout, err = parseUint(v, 0, 60)
			return err
		}},
	{"egressip-node-healthcheck-port", "ovnkubernetesfeature", "egressip-node-healthcheck-port", "0",
		"0: probe egress nodes on the DISCARD port; otherwise the gRPC health port every node serves",
		func(c *Config, v string) (err error) { c.HealthCheckPort, err = parseUint(v, 0, 65535); return err }},
	{"egressip-check-interval", "ovnedge", "egressip-check-interval", "5s", "interval between egress node reachability checks",
		func(c *Config, v string) (err error) { c.CheckInterval, err = parseDuration(v); return err }},
	{"egressip-agent-restart-grace", "ovnedge", "egressip-agent-restart-grace", "30s",
		"how long an egress node whose gRPC health port refuses connections (its host answers, its ovnedge restarts or is rolled out) stays reachable; 0: unreachable at once, as OVN-Kubernetes",
		func(c *Config, v string) (err error) { c.AgentRestartGrace, err = parseDurationOrZero(v); return err }},
	{"egressip-fast-failover", "ovnedge", "egressip-fast-failover", "false",
		"detect dead egress nodes with a UDP heartbeat (every --egressip-heartbeat-interval, down after --egressip-heartbeat-misses) beside the reachability checks, and give the L2 VIP election the same liveness",
		func(c *Config, v string) (err error) { c.FastFailover, err = strconv.ParseBool(v); return err }},
	{"egressip-heartbeat-interval", "ovnedge", "egressip-heartbeat-interval", "100ms", "interval of the fast failover heartbeat",
		func(c *Config, v string) (err error) { c.HeartbeatInterval, err = parseDuration(v); return err }},
	{"egressip-heartbeat-misses", "ovnedge", "egressip-heartbeat-misses", "3", "missed heartbeats after which a node is down",
		func(c *Config, v string) (err error) { c.HeartbeatMisses, err = parseUint(v, 1, 100); return err }},
	{"egressip-heartbeat-port", "ovnedge", "egressip-heartbeat-port", "9108", "UDP port every node answers heartbeats on (its management IP); node and leader must agree",
		func(c *Config, v string) (err error) { c.HeartbeatPort, err = parseUint(v, 1, 65535); return err }},
	{"egressip-heartbeat-key-file", "ovnedge", "egressip-heartbeat-key-file", "",
		"file holding the heartbeats' shared key (16 bytes or more; the same on every instance): heartbeats then carry an HMAC and replayed ones are refused; empty: unauthenticated",
		func(c *Config, v string) error { c.HeartbeatKeyFile = v; return nil }},
	{"egressip-host-lease", "ovnedge", "egressip-host-lease", "3s",
		"a node that hears neither the leader's heartbeat nor the API server for this long removes its egress IPs from host interfaces (0: never)",
		func(c *Config, v string) (err error) { c.HostLease, err = parseDurationOrZero(v); return err }},
	{"egressip-host-backend", "ovnedge", "egressip-host-backend", "auto",
		"SNAT of egress IPs on host interfaces: iptables (chain OVN-KUBE-EGRESS-IP-MULTI-NIC, as OVN-Kubernetes), nftables (through netlink: no binary needed), or auto (nftables, else iptables when the kernel's nftables API does not answer); iptables runs the iptables commands, which the ovnedge image lacks",
		func(c *Config, v string) error {
			switch v {
			case "iptables", "nftables", "auto":
				c.HostBackend = v
				return nil
			}
			return fmt.Errorf("%q: want iptables, nftables or auto", v)
		}},
	{"egressip-host-guard", "ovnedge", "egressip-host-guard", "true",
		"drop packets from the cluster subnets that leave a secondary host network (k8s.ovn.org/host-cidrs) without source NAT, in nftables table ovnedge-egressip-guard: a pod rerouted to this node before its egress IP's SNAT rule is in place never reaches that network with its own address",
		func(c *Config, v string) (err error) { c.HostGuard, err = strconv.ParseBool(v); return err }},
	{"enable-egress-ip", "ovnkubernetesfeature", "enable-egress-ip", "true", "program EgressIPs",
		func(c *Config, v string) (err error) { c.EnableEgressIP, err = strconv.ParseBool(v); return err }},
	{"enable-egress-service", "ovnkubernetesfeature", "enable-egress-service", "false",
		"program EgressServices (k8s.ovn.org/v1, their CRD must exist): the leader chooses each one's host node (status.host, node label egress-service.k8s.ovn.org/<namespace>-<name>) and reroutes the Service's endpoints to it (router policies at priority 101); the host SNATs them to the Service's ingress IP (nftables table ovnedge-egress-service) and, with spec.network, adds their ip rules; with the L2 announcer or BGP only the host announces the ingress IP. Node instances then keep every EndpointSlice whole",
		func(c *Config, v string) (err error) { c.EnableEgressService, err = strconv.ParseBool(v); return err }},
	{"gateway-flows", "gateway", "gateway-flows", "true",
		"program the shared gateway's base and Service flows on the bridge (NodePorts, ExternalIPs and LoadBalancer VIPs to OVN and back, conntrack zone 64000, NORMAL; they replace the bridge's default NORMAL flow); false where OVN-Kubernetes' node agent installs them (ovnedge then installs no flow it installs: only the EgressIP flows stay, under ovnedge's own cookie)",
		func(c *Config, v string) (err error) { c.GatewayFlows, err = strconv.ParseBool(v); return err }},
	{"bridge-mac", "ovnedge", "bridge-mac", "", "MAC address of the bridge for the gateway flows; empty: the bridge interface's mac_in_use in the Open_vSwitch database",
		func(c *Config, v string) (err error) { c.BridgeMAC, err = parseMAC(v); return err }},
	{"enable-l2-announce", "ovnedge", "enable-l2-announce", "false", "answer ARP/NDP for ExternalIP and LoadBalancer VIPs from one elected node (off, as upstream)",
		func(c *Config, v string) (err error) { c.EnableL2Announce, err = strconv.ParseBool(v); return err }},
	{"enable-lb-svc", "ovnedge", "enable-lb-svc", "false",
		"Kube-OVN LoadBalancer Services (as kube-ovn-controller's --enable-lb-svc): Services annotated ovn.kubernetes.io/attachmentprovider=<nad>.<namespace> get an address from the provider's kubeovn.io Subnet and an lb-svc-<service> Deployment running `ovnedge lbsvc-agent`; needs the Subnet and NetworkAttachmentDefinition CRDs",
		func(c *Config, v string) (err error) { c.EnableLBSvc, err = strconv.ParseBool(v); return err }},
	{"lb-svc-image", "ovnedge", "lb-svc-image", "", "image (holding the ovnedge binary) of the lb-svc Deployments; empty: the key image of ConfigMap kube-system/ovn-vpc-nat-config",
		func(c *Config, v string) error { c.LBSvcImage = v; return nil }},
	{"underlay-lb-mode", "kubeovn", "underlay-lb-mode", UnderlayOff,
		"LoadBalancer VIPs inside kubeovn.io Subnets with enableExternalLBAddress: off; metallb (MetalLB assigns and announces them, ovnedge programs the underlay switch's load balancers and the provider bridge's steering flows); standalone (ovnedge also assigns them from the Subnets' excludeIps and answers ARP for each from one node on --underlay-interface). Needs the Subnet CRD",
		func(c *Config, v string) error {
			switch v {
			case UnderlayOff, UnderlayMetalLB, UnderlayStandalone:
				c.UnderlayLBMode = v
				return nil
			}
			return fmt.Errorf("%q: want %s, %s or %s", v, UnderlayOff, UnderlayMetalLB, UnderlayStandalone)
		}},
	{"enable-ovn-lb-prefer-local", "kubeovn", "enable-ovn-lb-prefer-local", "false",
		"as kube-ovn-controller's flag: an underlay VIP of an externalTrafficPolicy=Local Service goes to the entering node's own endpoints (all when it has none), client address kept (per-chassis template load balancers on stock OVN)",
		func(c *Config, v string) (err error) { c.PreferLocal, err = strconv.ParseBool(v); return err }},
	{"ls-ct-skip-dst-lport-ips", "kubeovn", "ls-ct-skip-dst-lport-ips", "true",
		"as kube-ovn-controller's flag (Kube-OVN's MetalLB underlay guide sets it false): Kube-OVN's patched OVN then skips conntrack to logical port IPs, which breaks underlay VIPs; stock OVN has no such skip, so it only makes ovnedge warn (an event per affected Service)",
		func(c *Config, v string) (err error) { c.LSCtSkipDstLportIPs, err = strconv.ParseBool(v); return err }},
	{"provider-bridge", "kubeovn", "provider-bridge", "", "the node's provider bridge of the underlay (Kube-OVN's br-<provider network>): it gets the flows steering underlay VIP traffic from --provider-nic into OVN; empty: none",
		func(c *Config, v string) error { c.ProviderBridge = v; return nil }},
	{"provider-nic", "kubeovn", "provider-nic", "", "the provider bridge's port of the underlay NIC (Kube-OVN's ProviderNetwork defaultInterface)",
		func(c *Config, v string) error { c.ProviderNIC = v; return nil }},
	{"provider-vlan", "kubeovn", "provider-vlan", "0", "VLAN ID of the underlay subnets on the provider NIC: the steering flows match it (0: any frame)",
		func(c *Config, v string) (err error) { c.ProviderVLAN, err = parseUint(v, 0, 4094); return err }},
	{"underlay-interface", "kubeovn", "underlay-interface", "", "host interface on the underlay VLAN (e.g. underlay0.341) answering ARP for the node's underlay VIPs in standalone mode; empty: the provider bridge",
		func(c *Config, v string) error { c.UnderlayInterface = v; return nil }},
	{"leader-elect", "ovnedge", "leader-elect", "true", "campaign for the kube-system/ovnedge Lease and do the cluster-wide work (EgressIP assignment, NB, LB IPAM) while leading",
		func(c *Config, v string) (err error) { c.LeaderElect, err = strconv.ParseBool(v); return err }},
	{"leader-step-down-after", "ovnedge", "leader-step-down-after", "30s",
		"release the Lease, for another candidate, once the leader's cluster pass has failed this long (an NB it cannot reach); it campaigns again after a lease duration; 0 never",
		func(c *Config, v string) (err error) { c.LeaderStepDown, err = parseDurationOrZero(v); return err }},
	{"leader-avoid-egress-nodes", "ovnedge", "leader-avoid-egress-nodes", "true",
		"a leader on an egress-assignable node hands the Lease to a Ready candidate on a node that is not, so that the egress node's death does not hold the EgressIPs' failover up for a lease duration",
		func(c *Config, v string) (err error) {
			c.LeaderAvoidEgressNodes, err = strconv.ParseBool(v)
			return err
		}},
	{"cluster-manager-ha-election-lease-duration", "clustermgrha", "election-lease-duration", "15",
		"seconds a leader's Lease lasts after its last renewal: how long a dead leader's work waits for another (OVN-Kubernetes' flag; its default is 137)",
		func(c *Config, v string) (err error) { c.LeaseDuration, err = parseSeconds(v); return err }},
	{"cluster-manager-ha-election-renew-deadline", "clustermgrha", "election-renew-deadline", "10",
		"seconds the leader keeps trying to renew its Lease before it stops leading; less than the lease duration (OVN-Kubernetes' default 107)",
		func(c *Config, v string) (err error) { c.LeaseRenewDeadline, err = parseSeconds(v); return err }},
	{"cluster-manager-ha-election-retry-period", "clustermgrha", "election-retry-period", "2",
		"seconds between a candidate's attempts on the Lease; less than the renew deadline (OVN-Kubernetes' default 26)",
		func(c *Config, v string) (err error) { c.LeaseRetryPeriod, err = parseSeconds(v); return err }},
	{"enable-bgp", "bgp", "enable", "false",
		"announce ExternalIPs and LoadBalancer ingress VIPs over BGP from every node that can serve them (externalTrafficPolicy=Local: nodes with a ready local endpoint), from an embedded speaker (node instances)",
		func(c *Config, v string) (err error) { c.EnableBGP, err = strconv.ParseBool(v); return err }},
	{"bgp-announce-egress-ips", "bgp", "announce-egress-ips", "false", "also announce each egress IP from the node it is assigned to",
		func(c *Config, v string) (err error) { c.BGPEgressIPs, err = strconv.ParseBool(v); return err }},
	{"bgp-asn", "bgp", "asn", "64513", "this node's autonomous system number",
		func(c *Config, v string) (err error) { c.BGPASN, err = parseASN(v); return err }},
	{"bgp-router-id", "bgp", "router-id", "", "BGP identifier (an IPv4 address); empty: the node's IPv4 InternalIP",
		func(c *Config, v string) (err error) { c.BGPRouterID, err = parseOptionalAddr(v, true); return err }},
	{"bgp-peer-address", "bgp", "peer-address", "", "BGP peers (routers), comma-separated addresses; IPv4 VIPs go to IPv4 peers, IPv6 VIPs to IPv6 peers",
		func(c *Config, v string) (err error) { c.BGPPeers, err = parseAddrs(v); return err }},
	{"bgp-peer-asn", "bgp", "peer-asn", "64512", "the peers' autonomous system number",
		func(c *Config, v string) (err error) { c.BGPPeerASN, err = parseASN(v); return err }},
	{"bgp-peer-port", "bgp", "peer-port", "179", "the peers' TCP port",
		func(c *Config, v string) error {
			n, err := parseUint(v, 1, 65535)
			c.BGPPeerPort = uint16(n)
			return err
		}},
	{"bgp-listen-port", "bgp", "listen-port", "0", "TCP port to also accept the peers' sessions on (179 lets routers connect actively); 0: ovnedge opens every session",
		func(c *Config, v string) (err error) { c.BGPListenPort, err = parseUint(v, 0, 65535); return err }},
	{"bgp-hold-time", "bgp", "hold-time", "90s", "BGP hold time proposed to the peers (3s or more; keepalives every third)",
		func(c *Config, v string) (err error) {
			c.BGPHoldTime, err = parseDuration(v)
			if err == nil && (c.BGPHoldTime < 3*time.Second || c.BGPHoldTime > 65535*time.Second) {
				err = fmt.Errorf("%v out of range 3s-65535s", c.BGPHoldTime)
			}
			return err
		}},
	{"bgp-bfd", "bgp", "bfd", "false", "run BFD with every peer (single-hop): a dead peer or node is detected in --bgp-bfd-interval x --bgp-bfd-multiplier",
		func(c *Config, v string) (err error) { c.BGPBFD, err = strconv.ParseBool(v); return err }},
	{"bgp-bfd-interval", "bgp", "bfd-interval", "300ms", "BFD transmit and receive interval",
		func(c *Config, v string) (err error) { c.BGPBFDInterval, err = parseDuration(v); return err }},
	{"bgp-bfd-multiplier", "bgp", "bfd-multiplier", "3", "BFD detection multiplier",
		func(c *Config, v string) (err error) { c.BGPBFDMultiplier, err = parseUint(v, 1, 255); return err }},
	{"bgp-graceful-restart", "bgp", "graceful-restart", "120s",
		"graceful restart time: peers keep the routes this long while ovnedge restarts (it stops without a notification and comes back with the restart flag); 0 disables",
		func(c *Config, v string) (err error) {
			c.BGPGracefulRestart, err = parseDurationOrZero(v)
			if err == nil && c.BGPGracefulRestart > 4095*time.Second {
				err = fmt.Errorf("%v out of range 0-4095s", c.BGPGracefulRestart)
			}
			return err
		}},
	{"bgp-communities", "bgp", "communities", "", "communities of each LB pool's routes, comma-separated POOL=AS:VALUE (a pool may repeat)",
		func(c *Config, v string) (err error) { c.BGPCommunities, err = parseCommunities(v); return err }},
	{"bgp-local-pref", "bgp", "local-pref", "", "LOCAL_PREF of each LB pool's routes (iBGP peers), comma-separated POOL=N",
		func(c *Config, v string) (err error) { c.BGPLocalPref, err = parseLocalPref(v); return err }},
	{"bgp-peer-crds", "bgp", "peer-crds", "false",
		"also peer with the routers of MetalLB's BGPPeer objects (metallb.io/v1beta2, with their BFDProfiles) in --bgp-crd-namespace whose nodeSelectors match the node",
		func(c *Config, v string) (err error) { c.BGPPeerCRDs, err = strconv.ParseBool(v); return err }},
	{"bgp-crd-namespace", "bgp", "crd-namespace", "metallb-system", "namespace of the BGPPeer and BFDProfile objects",
		func(c *Config, v string) error { c.BGPCRDNamespace = v; return nil }},
	{"bgp-shutdown", "bgp", "shutdown", "auto",
		"how a stopping node instance leaves its peers: restart (graceful restart keeps the routes), withdraw (routes withdrawn at once), auto (withdraw when the node is cordoned, being deleted or out of service)",
		func(c *Config, v string) error {
			switch v {
			case "auto", "restart", "withdraw":
				c.BGPShutdown = v
				return nil
			}
			return fmt.Errorf("%q is not auto, restart or withdraw", v)
		}},
	{"metrics-address", "ovnedge", "metrics-address", ":9476",
		"address of /metrics, and of /healthz and /readyz when --health-address is empty and --metrics-secure false; empty disables",
		func(c *Config, v string) error { c.MetricsAddr = v; return nil }},
	{"metrics-secure", "ovnedge", "metrics-secure", "false",
		"serve /metrics over HTTPS, only to clients whose bearer token the API server authenticates (TokenReview) and allows get on the non-resource URL /metrics (SubjectAccessReview); health then only on --health-address",
		func(c *Config, v string) (err error) { c.MetricsSecure, err = strconv.ParseBool(v); return err }},
	{"metrics-cert-file", "ovnedge", "metrics-cert-file", "",
		"PEM certificate of the secure metrics (read again when it changes); empty, with --metrics-key-file: a self-signed one made at start",
		func(c *Config, v string) error { c.MetricsCertFile = v; return nil }},
	{"metrics-key-file", "ovnedge", "metrics-key-file", "", "PEM private key of --metrics-cert-file",
		func(c *Config, v string) error { c.MetricsKeyFile = v; return nil }},
	{"health-address", "ovnedge", "health-address", "",
		"address of /healthz and /readyz alone, plain HTTP (the kubelet's probes); empty: on a plain --metrics-address",
		func(c *Config, v string) error { c.HealthAddr = v; return nil }},
	{"enable-pprof", "ovnedge", "enable-pprof", "false", "serve /debug/pprof, on loopback only (--pprof-address)",
		func(c *Config, v string) (err error) { c.Pprof, err = strconv.ParseBool(v); return err }},
	{"pprof-address", "ovnedge", "pprof-address", "",
		"loopback address of /debug/pprof with --enable-pprof; empty: on --metrics-address when that is a plain loopback address",
		func(c *Config, v string) error {
			if v != "" && !metrics.Loopback(v) {
				return fmt.Errorf("%q is not a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)", v)
			}
			c.PprofAddr = v
			return nil
		}},
	{"gc-ahead", "ovnedge", "gc-ahead", "true", "after a cluster pass, start a garbage collection while idle when the Go runtime would start its next one late, with the next pass",
		func(c *Config, v string) (err error) { c.GCAhead, err = strconv.ParseBool(v); return err }},
	{"full-recompute", "ovnedge", "full-recompute", "10m",
		"how often the leader recomputes its whole desired state from the informers' caches, off its cluster loop, to check the incremental one",
		func(c *Config, v string) (err error) { c.FullRecompute, err = parseDuration(v); return err }},
	{"log-level", "ovnedge", "log-level", "info", "lowest level logged: debug, info, warn or error",
		func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(v)) }},
}

// The values of --underlay-lb-mode (desired.Params.Underlay).
const (
	UnderlayOff        = desired.UnderlayOff
	UnderlayMetalLB    = desired.UnderlayMetalLB
	UnderlayStandalone = desired.UnderlayStandalone
)

// isBoolFlag reports whether arg is a boolean option's flag without a
// value ("--enable-l2-announce").
func isBoolFlag(arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, o := range options {
		if o.name == name && (o.def == "true" || o.def == "false") {
			return true
		}
	}
	return false
}

// aliases are other names of some flags: the spelling of the
// render and sync commands (`--node`, `--ovn-nb`).
var aliases = map[string]string{"node": "node-name", "ovn-nb": "nb-address",
	"gateway-v4-join-subnet": "join-subnet", "gateway-v6-join-subnet": "v6-join-subnet"}

// ParseConfig reads args (without the program and subcommand names) and
// the config file they name. Errors name the flag or file key at fault.
// extra registers a subcommand's own flags on the same FlagSet.
func ParseConfig(name string, args []string, extra ...func(*flag.FlagSet)) (*Config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	given := map[string]string{}
	for _, o := range options {
		usage := fmt.Sprintf("%s (default %q)", o.usage, o.def)
		set := func(v string) error {
			given[o.name] = v
			return o.set(&Config{}, v) // validate now, apply in order below
		}
		if o.def == "true" || o.def == "false" {
			// A boolean: --enable-x alone means true, --enable-x=false too works.
			fs.BoolFunc(o.name, usage, set)
			continue
		}
		fs.Func(o.name, usage, set)
	}
	for alias, canonical := range aliases {
		fs.Func(alias, "same as --"+canonical, func(v string) error { return fs.Set(canonical, v) })
	}
	for _, f := range extra {
		f(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if rest := fs.Args(); len(rest) > 0 {
		// "--enable-x false" sets the boolean and leaves "false" behind.
		if i := len(args) - len(rest) - 1; i >= 0 && isBoolFlag(args[i]) {
			return nil, fs, fmt.Errorf("%s is a boolean flag: write %s=%s", args[i], args[i], rest[0])
		}
		return nil, fs, fmt.Errorf("unexpected argument %q", rest[0])
	}
	c := &Config{}
	for _, o := range options {
		if err := o.set(c, o.def); err != nil {
			return nil, fs, fmt.Errorf("default of --%s: %w", o.name, err)
		}
	}
	if path := given["config-file"]; path != "" {
		file, err := readConfigFile(path)
		if err != nil {
			return nil, fs, err
		}
		for _, o := range options {
			if v, ok := file[o.section+"."+o.key]; ok {
				if err := o.set(c, v); err != nil {
					return nil, fs, fmt.Errorf("%s: [%s] %s: %w", path, o.section, o.key, err)
				}
			}
		}
	}
	for _, o := range options {
		if v, ok := given[o.name]; ok {
			if err := o.set(c, v); err != nil {
				return nil, fs, fmt.Errorf("--%s: %w", o.name, err)
			}
		}
	}
	return c, fs, nil
}

// readConfigFile returns the file's values as "section.key" -> value.
// Sections and keys ovnedge does not know (an OVN-Kubernetes config file
// has many) are ignored.
func readConfigFile(path string) (map[string]string, error) {
	var raw struct {
		Default, Kubernetes, Gateway, Ovnnorth, Ovnsouth, Ovnkubernetesfeature, Ovnedge, Bgp, Kubeovn, Clustermgrha rawSection
	}
	if err := gcfg.FatalOnly(gcfg.ReadFileInto(&raw, path)); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	sections := map[string]*rawSection{"default": &raw.Default, "kubernetes": &raw.Kubernetes, "gateway": &raw.Gateway, "ovnnorth": &raw.Ovnnorth, "ovnsouth": &raw.Ovnsouth,
		"ovnkubernetesfeature": &raw.Ovnkubernetesfeature, "ovnedge": &raw.Ovnedge, "bgp": &raw.Bgp, "kubeovn": &raw.Kubeovn,
		"clustermgrha": &raw.Clustermgrha}
	out := map[string]string{}
	for _, o := range options {
		if s := sections[o.section]; s != nil {
			if v := s.get(o.key); v != nil {
				out[o.section+"."+o.key] = *v
			}
		}
	}
	return out, nil
}

// rawSection holds every key any section may carry, as text; gcfg fills
// the ones present in the file.
type rawSection struct {
	NodeName                         *string `gcfg:"node-name"`
	Kubeconfig                       *string `gcfg:"kubeconfig"`
	KubeAPIQPS                       *string `gcfg:"kube-api-qps"`
	KubeAPIBurst                     *string `gcfg:"kube-api-burst"`
	Manifests                        *string `gcfg:"manifests"`
	ClusterSubnets                   *string `gcfg:"cluster-subnets"`
	V4JoinSubnet                     *string `gcfg:"v4-join-subnet"`
	V6JoinSubnet                     *string `gcfg:"v6-join-subnet"`
	V4MasqueradeSubnet               *string `gcfg:"v4-masquerade-subnet"`
	V6MasqueradeSubnet               *string `gcfg:"v6-masquerade-subnet"`
	LBTemplates                      *string `gcfg:"lb-templates"`
	LBSourceRanges                   *string `gcfg:"lb-source-ranges"`
	OVNEmptyLBEvents                 *string `gcfg:"ovn-empty-lb-events"`
	Address                          *string `gcfg:"address"`
	ClientPrivkey                    *string `gcfg:"client-privkey"`
	ClientCert                       *string `gcfg:"client-cert"`
	ClientCacert                     *string `gcfg:"client-cacert"`
	OVSDB                            *string `gcfg:"ovs-db"`
	OVSRundir                        *string `gcfg:"ovs-rundir"`
	Bridge                           *string `gcfg:"bridge"`
	Uplink                           *string `gcfg:"uplink"`
	PatchPort                        *string `gcfg:"patch-port"`
	LBPools                          *string `gcfg:"lb-pools"`
	LBClass                          *string `gcfg:"lb-class"`
	HostNetns                        *string `gcfg:"host-netns"`
	ConntrackZone                    *string `gcfg:"conntrack-zone"`
	EgressIPReachabilityTotalTimeout *string `gcfg:"egressip-reachability-total-timeout"`
	EgressIPNodeHealthcheckPort      *string `gcfg:"egressip-node-healthcheck-port"`
	EgressIPCheckInterval            *string `gcfg:"egressip-check-interval"`
	EgressIPAgentRestartGrace        *string `gcfg:"egressip-agent-restart-grace"`
	EnableEgressIP                   *string `gcfg:"enable-egress-ip"`
	EnableEgressService              *string `gcfg:"enable-egress-service"`
	EgressIPFastFailover             *string `gcfg:"egressip-fast-failover"`
	EgressIPHeartbeatInterval        *string `gcfg:"egressip-heartbeat-interval"`
	EgressIPHeartbeatMisses          *string `gcfg:"egressip-heartbeat-misses"`
	EgressIPHeartbeatPort            *string `gcfg:"egressip-heartbeat-port"`
	EgressIPHeartbeatKeyFile         *string `gcfg:"egressip-heartbeat-key-file"`
	EgressIPHostLease                *string `gcfg:"egressip-host-lease"`
	EgressIPHostBackend              *string `gcfg:"egressip-host-backend"`
	EgressIPHostGuard                *string `gcfg:"egressip-host-guard"`
	EnableL2Announce                 *string `gcfg:"enable-l2-announce"`
	GatewayFlows                     *string `gcfg:"gateway-flows"`
	BridgeMAC                        *string `gcfg:"bridge-mac"`
	EnableLBSvc                      *string `gcfg:"enable-lb-svc"`
	LBSvcImage                       *string `gcfg:"lb-svc-image"`
	LeaderElect                      *string `gcfg:"leader-elect"`
	LeaderStepDownAfter              *string `gcfg:"leader-step-down-after"`
	LeaderAvoidEgressNodes           *string `gcfg:"leader-avoid-egress-nodes"`
	ElectionLeaseDuration            *string `gcfg:"election-lease-duration"`
	ElectionRenewDeadline            *string `gcfg:"election-renew-deadline"`
	ElectionRetryPeriod              *string `gcfg:"election-retry-period"`
	MetricsAddress                   *string `gcfg:"metrics-address"`
	MetricsSecure                    *string `gcfg:"metrics-secure"`
	MetricsCertFile                  *string `gcfg:"metrics-cert-file"`
	MetricsKeyFile                   *string `gcfg:"metrics-key-file"`
	HealthAddress                    *string `gcfg:"health-address"`
	EnablePprof                      *string `gcfg:"enable-pprof"`
	PprofAddress                     *string `gcfg:"pprof-address"`
	GCAhead                          *string `gcfg:"gc-ahead"`
	FullRecompute                    *string `gcfg:"full-recompute"`
	ManifestsPoll                    *string `gcfg:"manifests-poll"`
	LogLevel                         *string `gcfg:"log-level"`
	// [bgp]
	Enable            *string `gcfg:"enable"`
	AnnounceEgressIPs *string `gcfg:"announce-egress-ips"`
	ASN               *string `gcfg:"asn"`
	RouterID          *string `gcfg:"router-id"`
	PeerAddress       *string `gcfg:"peer-address"`
	PeerASN           *string `gcfg:"peer-asn"`
	PeerPort          *string `gcfg:"peer-port"`
	ListenPort        *string `gcfg:"listen-port"`
	HoldTime          *string `gcfg:"hold-time"`
	BFD               *string `gcfg:"bfd"`
	BFDInterval       *string `gcfg:"bfd-interval"`
	BFDMultiplier     *string `gcfg:"bfd-multiplier"`
	GracefulRestart   *string `gcfg:"graceful-restart"`
	Communities       *string `gcfg:"communities"`
	LocalPref         *string `gcfg:"local-pref"`
	PeerCRDs          *string `gcfg:"peer-crds"`
	CRDNamespace      *string `gcfg:"crd-namespace"`
	Shutdown          *string `gcfg:"shutdown"`
	// [kubeovn]
	UnderlayLBMode         *string `gcfg:"underlay-lb-mode"`
	EnableOVNLBPreferLocal *string `gcfg:"enable-ovn-lb-prefer-local"`
	LSCtSkipDstLportIPs    *string `gcfg:"ls-ct-skip-dst-lport-ips"`
	ProviderBridge         *string `gcfg:"provider-bridge"`
	ProviderNIC            *string `gcfg:"provider-nic"`
	ProviderVLAN           *string `gcfg:"provider-vlan"`
	UnderlayInterface      *string `gcfg:"underlay-interface"`
}

// get returns the value of key, nil when the file does not set it.
func (s *rawSection) get(key string) *string {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("gcfg") == key {
			return v.Field(i).Interface().(*string)
		}
	}
	return nil
}

// ParseClusterSubnets parses `--cluster-subnets`: comma-separated
// CIDR[/hostPrefix] entries such as "10.244.0.0/16/24,fd00:10:244::/48/64".
// The host prefix defaults to 24 for IPv4 and 64 for IPv6.
func ParseClusterSubnets(s string) ([]ClusterSubnet, error) {
	var out []ClusterSubnet
	for _, entry := range splitList(s) {
		cidr, host := entry, ""
		if strings.Count(entry, "/") == 2 {
			i := strings.LastIndex(entry, "/")
			cidr, host = entry[:i], entry[i+1:]
		}
		p, err := parseSubnet(cidr)
		if err != nil {
			return nil, fmt.Errorf("cluster subnet %q: %w", entry, err)
		}
		cs := ClusterSubnet{CIDR: p, HostPrefix: 24}
		if p.Addr().Is6() {
			cs.HostPrefix = 64
		}
		if host != "" {
			if cs.HostPrefix, err = parseUint(host, p.Bits(), p.Addr().BitLen()); err != nil {
				return nil, fmt.Errorf("cluster subnet %q: host prefix: %w", entry, err)
			}
		} else if cs.HostPrefix < p.Bits() {
			cs.HostPrefix = p.Bits()
		}
		out = append(out, cs)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cluster subnet")
	}
	return out, nil
}

// parseSubnet parses a CIDR that must be given in its network form.
// parseFamilySubnet is parseSubnet of an IPv6 (v6) or IPv4 subnet.
func parseFamilySubnet(s string, v6 bool) (netip.Prefix, error) {
	p, err := parseSubnet(s)
	if err == nil && p.Addr().Is6() != v6 {
		want := "IPv4"
		if v6 {
			want = "IPv6"
		}
		err = fmt.Errorf("%s is not an %s subnet", s, want)
	}
	return p, err
}

func parseSubnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return p, err
	}
	if p != p.Masked() {
		return p, fmt.Errorf("%s has host bits set (did you mean %s?)", s, p.Masked())
	}
	return p, nil
}

// parseMasquerade parses a masquerade subnet of the family, large enough
// for OVN-Kubernetes' five addresses (.1 to .5).
func parseMasquerade(s string, v6 bool) (netip.Prefix, error) {
	p, err := parseSubnet(s)
	if err != nil {
		return p, err
	}
	if p.Addr().Is6() != v6 {
		return p, fmt.Errorf("%s is not an IPv%s subnet", s, map[bool]string{false: "4", true: "6"}[v6])
	}
	if p.Addr().BitLen()-p.Bits() < 3 {
		return p, fmt.Errorf("%s is smaller than a /%d (it needs 5 addresses)", s, p.Addr().BitLen()-3)
	}
	return p, nil
}

func parseUint(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d out of range %d-%d", n, lo, hi)
	}
	return n, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s is not positive", s)
	}
	return d, err
}

// parseSeconds parses a positive whole number of seconds.
func parseSeconds(s string) (time.Duration, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err == nil && n <= 0 {
		err = fmt.Errorf("%s is not a positive number of seconds", s)
	}
	return time.Duration(n) * time.Second, err
}

// CheckLease refuses Lease timings client-go's election cannot keep:
// the lease duration must exceed the renew deadline, which must exceed
// the retry period (OVN-Kubernetes refuses the same).
func (c *Config) CheckLease() error {
	if c.LeaseDuration <= c.LeaseRenewDeadline {
		return fmt.Errorf("--cluster-manager-ha-election-lease-duration %v must be longer than --cluster-manager-ha-election-renew-deadline %v",
			c.LeaseDuration, c.LeaseRenewDeadline)
	}
	if c.LeaseRenewDeadline <= c.LeaseRetryPeriod {
		return fmt.Errorf("--cluster-manager-ha-election-renew-deadline %v must be longer than --cluster-manager-ha-election-retry-period %v",
			c.LeaseRenewDeadline, c.LeaseRetryPeriod)
	}
	return nil
}

// parseDurationOrZero parses a duration that may be 0.
func parseDurationOrZero(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil && d < 0 {
		err = fmt.Errorf("%s is negative", s)
	}
	return d, err
}

// parseMAC parses a 6-byte MAC address; "" is none.
func parseMAC(s string) (net.HardwareAddr, error) {
	if s = strings.TrimSpace(s); s == "" {
		return nil, nil
	}
	mac, err := net.ParseMAC(s)
	if err == nil && len(mac) != 6 {
		err = fmt.Errorf("%s is not a 6-byte MAC address", s)
	}
	return mac, err
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParseLBPools parses `--lb-pools`: comma-separated NAME=CIDR entries
// such as "public=172.18.0.200/29". Pools must not overlap.
func ParseLBPools(s string) ([]*ipam.Pool, error) {
	var pools []*ipam.Pool
	for _, entry := range splitList(s) {
		name, cidr, ok := strings.Cut(entry, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("lb pool %q: want NAME=CIDR", entry)
		}
		p, err := ipam.NewPool(name, cidr, nil)
		if err != nil {
			return nil, fmt.Errorf("lb pool %q: %w", entry, err)
		}
		pools = append(pools, p)
	}
	if _, err := ipam.NewAllocator(pools...); err != nil {
		return nil, fmt.Errorf("lb pools: %w", err)
	}
	return pools, nil
}

// parseASN parses an autonomous system number (1-4294967295).
func parseASN(s string) (uint32, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err == nil && n == 0 {
		err = fmt.Errorf("ASN 0")
	}
	return uint32(n), err
}

// parseOptionalAddr parses an address ("" is none); v4 requires IPv4.
func parseOptionalAddr(s string, v4 bool) (netip.Addr, error) {
	if s = strings.TrimSpace(s); s == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(s)
	if err == nil && v4 && !a.Is4() {
		err = fmt.Errorf("%s is not an IPv4 address", s)
	}
	return a, err
}

// parseAddrs parses comma-separated addresses.
func parseAddrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range splitList(s) {
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// parseCommunities parses POOL=AS:VALUE entries.
func parseCommunities(s string) (map[string][]bgp.Community, error) {
	out := map[string][]bgp.Community{}
	for _, f := range splitList(s) {
		pool, v, ok := strings.Cut(f, "=")
		if !ok || pool == "" {
			return nil, fmt.Errorf("%q: want POOL=AS:VALUE", f)
		}
		c, err := bgp.ParseCommunity(v)
		if err != nil {
			return nil, err
		}
		out[pool] = append(out[pool], c)
	}
	return out, nil
}

// parseLocalPref parses POOL=N entries.
func parseLocalPref(s string) (map[string]uint32, error) {
	out := map[string]uint32{}
	for _, f := range splitList(s) {
		pool, v, ok := strings.Cut(f, "=")
		if !ok || pool == "" {
			return nil, fmt.Errorf("%q: want POOL=N", f)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		out[pool] = uint32(n)
	}
	return out, nil
}

// BGP returns the speaker configuration of a node whose router ID (unless
// --bgp-router-id is given) is routerID: one peer per --bgp-peer-address
// and the LB pools' communities and local preference. It is an error to
// enable BGP without a peer or a router ID.
func (c *Config) BGP(routerID netip.Addr) (bgp.Config, error) {
	out := bgp.Config{ASN: c.BGPASN, RouterID: routerID, GracefulRestart: c.BGPGracefulRestart, ListenPort: c.BGPListenPort,
		// Always flag a restart: after a fresh start the peers have no
		// stale routes and nothing changes; after a restart they keep
		// forwarding on the old routes until the End-of-RIB.
		Restarting: c.BGPGracefulRestart > 0}
	if c.BGPRouterID.IsValid() {
		out.RouterID = c.BGPRouterID
	}
	if len(c.BGPPeers) == 0 && !c.BGPPeerCRDs {
		return out, fmt.Errorf("--enable-bgp without --bgp-peer-address or --bgp-peer-crds")
	}
	for _, a := range c.BGPPeers {
		p := bgp.Peer{Address: a, ASN: c.BGPPeerASN, Port: c.BGPPeerPort, HoldTime: c.BGPHoldTime}
		if c.BGPBFD {
			p.BFD = bgp.BFD{Enabled: true, Interval: c.BGPBFDInterval, Multiplier: c.BGPBFDMultiplier}
		}
		out.Peers = append(out.Peers, p)
	}
	for _, pool := range c.LBPools {
		comm, lp := c.BGPCommunities[pool.Name], c.BGPLocalPref[pool.Name]
		if len(comm) == 0 && lp == 0 {
			continue
		}
		out.Pools = append(out.Pools, bgp.Pool{Name: pool.Name, Prefixes: []netip.Prefix{pool.CIDR}, Communities: comm, LocalPref: lp})
	}
	for name := range c.BGPCommunities {
		if !slices.ContainsFunc(c.LBPools, func(p *ipam.Pool) bool { return p.Name == name }) {
			return out, fmt.Errorf("--bgp-communities: no LB pool %q", name)
		}
	}
	for name := range c.BGPLocalPref {
		if !slices.ContainsFunc(c.LBPools, func(p *ipam.Pool) bool { return p.Name == name }) {
			return out, fmt.Errorf("--bgp-local-pref: no LB pool %q", name)
		}
	}
	if err := out.Validate(); err != nil {
		return out, err
	}
	return out, nil
}

// Patch returns the bridge's patch port to br-int: PatchPort, or
// OVN-Kubernetes' name for it.
func (c *Config) Patch() string {
	if c.PatchPort != "" {
		return c.PatchPort
	}
	return "patch-" + c.Bridge + "_" + c.NodeName + "-to-br-int"
}

// HealthTLS are the files of the egress health check's gRPC session:
// the Northbound client's certificate, key and CA ([ovnnorth]), as
// OVN-Kubernetes uses them on both sides.
func (c *Config) HealthTLS() reach.TLSFiles {
	return reach.TLSFiles{CertFile: c.NBCert, KeyFile: c.NBPrivKey, CAFile: c.NBCA}
}
