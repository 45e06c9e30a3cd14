package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ipam"
)

// Defaults of the optional configuration keys.
const (
	defaultBridge = "br-int"
	defaultOVSDB  = "unix:/run/openvswitch/db.sock"
	defaultMTU    = 1400
)

// netConf is the plugin's entry of a conflist (see the package doc).
type netConf struct {
	types.PluginConf
	NBAddress     string `json:"nbAddress"`
	OVSDB         string `json:"ovsdb"`
	Bridge        string `json:"bridge"`
	LogicalSwitch string `json:"logicalSwitch"`
	MTU           int    `json:"mtu"`
}

// podArgs are the CNI_ARGS the kubelet's runtime passes (the field names
// are the keys).
type podArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE types.UnmarshallableString
	K8S_POD_NAME      types.UnmarshallableString
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus},
		version.All, "ovncni: plugs pods into OVN as OVN-Kubernetes does (an ovnedge example)")
}

// parseConfig decodes the network configuration, fills in the defaults
// and checks the required keys.
func parseConfig(stdin []byte) (*netConf, error) {
	conf := &netConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, fmt.Errorf("ovncni: parse network config: %w", err)
	}
	if conf.Bridge == "" {
		conf.Bridge = defaultBridge
	}
	if conf.OVSDB == "" {
		conf.OVSDB = defaultOVSDB
	}
	if conf.MTU == 0 {
		conf.MTU = defaultMTU
	}
	switch {
	case conf.NBAddress == "":
		return nil, errors.New(`ovncni: network config: "nbAddress" is required (the OVN NB, e.g. "tcp:10.89.0.1:6641")`)
	case conf.LogicalSwitch == "":
		return nil, errors.New(`ovncni: network config: "logicalSwitch" is required (the node's logical switch)`)
	case conf.IPAM.Type == "":
		return nil, errors.New(`ovncni: network config: "ipam" with a "type" is required`)
	case conf.MTU < 68 || conf.MTU > 65535:
		return nil, fmt.Errorf(`ovncni: network config: "mtu" %d out of range 68-65535`, conf.MTU)
	}
	for _, ep := range nbEndpoints(conf.NBAddress) {
		if !strings.HasPrefix(ep, "tcp:") && !strings.HasPrefix(ep, "unix:") {
			return nil, fmt.Errorf(`ovncni: network config: "nbAddress" endpoint %q: want tcp:HOST:PORT or unix:PATH`, ep)
		}
	}
	return conf, nil
}

// nbEndpoints splits a comma-separated list of OVSDB remotes.
func nbEndpoints(addr string) []string {
	var eps []string
	for ep := range strings.SplitSeq(addr, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

// pod is who the attachment is for, from CNI_ARGS.
type pod struct {
	Namespace, Name string
}

// parsePodArgs reads K8S_POD_NAMESPACE and K8S_POD_NAME from CNI_ARGS.
func parsePodArgs(cniArgs string) (pod, error) {
	a := podArgs{}
	if err := types.LoadArgs(cniArgs, &a); err != nil {
		return pod{}, fmt.Errorf("ovncni: CNI_ARGS: %w", err)
	}
	return pod{Namespace: string(a.K8S_POD_NAMESPACE), Name: string(a.K8S_POD_NAME)}, nil
}

// lspName is the pod's logical switch port: <namespace>_<name>, as
// OVN-Kubernetes' util.GetLogicalPortName names it, or the container ID
// when CNI_ARGS do not say which pod it is.
func lspName(p pod, containerID string) string {
	if p.Namespace == "" || p.Name == "" {
		return containerID
	}
	return p.Namespace + "_" + p.Name
}

// hostVethName is the veth end on the bridge: "ovn" and the first 12
// characters of the container ID (15 in all, the kernel's limit).
func hostVethName(containerID string) string {
	return "ovn" + containerID[:min(12, len(containerID))]
}

// podMAC is the MAC OVN-Kubernetes gives a pod (util.IPAddrToHWAddr):
// 0a:58 and the 4 bytes of its first IPv4 address, or for an IPv6-only
// pod the first 4 bytes of the SHA-256 of its first address's text.
func podMAC(ips []*current.IPConfig) (net.HardwareAddr, error) {
	for _, ipc := range ips {
		if ip4 := ipc.Address.IP.To4(); ip4 != nil {
			return net.HardwareAddr{0x0a, 0x58, ip4[0], ip4[1], ip4[2], ip4[3]}, nil
		}
	}
	if len(ips) == 0 {
		return nil, errors.New("ovncni: IPAM returned no address")
	}
	h := sha256.Sum256([]byte(ips[0].Address.IP.String()))
	return net.HardwareAddr{0x0a, 0x58, h[0], h[1], h[2], h[3]}, nil
}

// lspAddresses is the port's addresses (and port_security) entry:
// "<MAC> <IP> [<IP>...]".
func lspAddresses(mac net.HardwareAddr, ips []*current.IPConfig) string {
	fields := []string{mac.String()}
	for _, ipc := range ips {
		fields = append(fields, ipc.Address.IP.String())
	}
	return strings.Join(fields, " ")
}

// cmdAdd allocates the addresses, plugs the veth into the pod and the
// bridge, binds the logical switch port and prints the result. A failure
// after the allocation undoes what was done, the allocation too.
func cmdAdd(args *skel.CmdArgs) (err error) {
	conf, p, err := load(args)
	if err != nil {
		return err
	}
	lsp, host := lspName(p, args.ContainerID), hostVethName(args.ContainerID)
	result, err := allocate(conf, args.StdinData)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = teardown(conf, args, lsp) // best effort: err says what failed
		}
	}()
	mac, err := podMAC(result.IPs)
	if err != nil {
		return err
	}
	if err = plugVeth(args, conf.MTU, host, mac, result); err != nil {
		return err
	}
	if err = addPort(conf, host, lsp, args.ContainerID); err != nil {
		return err
	}
	if err = bindLSP(conf, lsp, p.Namespace, lspAddresses(mac, result.IPs)); err != nil {
		return err
	}
	return types.PrintResult(result, conf.CNIVersion)
}

// load parses the configuration and CNI_ARGS.
func load(args *skel.CmdArgs) (*netConf, pod, error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return nil, pod{}, err
	}
	p, err := parsePodArgs(args.Args)
	return conf, p, err
}

// allocate runs the IPAM plugin and converts its result to this CNI
// version's.
func allocate(conf *netConf, stdin []byte) (*current.Result, error) {
	r, err := ipam.ExecAdd(conf.IPAM.Type, stdin)
	if err != nil {
		return nil, fmt.Errorf("ovncni: IPAM %s: %w", conf.IPAM.Type, err)
	}
	result, err := current.NewResultFromResult(r)
	if err == nil && len(result.IPs) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		_ = ipam.ExecDel(conf.IPAM.Type, stdin)
		return nil, fmt.Errorf("ovncni: IPAM %s result: %w", conf.IPAM.Type, err)
	}
	return result, nil
}

// cmdDel removes the bridge port, the pod's interface, the logical
// switch port and the allocation, going on past a failed step; what is
// already gone is no error.
func cmdDel(args *skel.CmdArgs) error {
	conf, p, err := load(args)
	if err != nil {
		return err
	}
	return teardown(conf, args, lspName(p, args.ContainerID))
}

// teardown is DEL's work, also the rollback of a failed ADD.
func teardown(conf *netConf, args *skel.CmdArgs, lsp string) error {
	host := hostVethName(args.ContainerID)
	errs := []error{delPort(conf, host), unplugVeth(args, host)}
	// Another sandbox of the same pod on this node may have claimed the
	// port already (a DEL of the old one coming late): leave it then.
	claimed, err := portClaimed(conf, lsp)
	errs = append(errs, err)
	if err == nil && !claimed {
		errs = append(errs, deleteLSP(conf, lsp))
	}
	if err := ipam.ExecDel(conf.IPAM.Type, args.StdinData); err != nil {
		errs = append(errs, fmt.Errorf("ovncni: IPAM %s release: %w", conf.IPAM.Type, err))
	}
	return errors.Join(errs...)
}

// cmdCheck does nothing: the plugin keeps no state to compare.
func cmdCheck(*skel.CmdArgs) error { return nil }

// cmdGC does nothing: stale logical switch ports are left to whoever
// owns the pods' lifecycle (ovnkube-controller in OVN-Kubernetes).
func cmdGC(*skel.CmdArgs) error { return nil }

// cmdStatus reports the plugin ready when its configuration is valid.
func cmdStatus(args *skel.CmdArgs) error {
	_, err := parseConfig(args.StdinData)
	return err
}
