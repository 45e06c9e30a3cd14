// Real Kubernetes nodes for end-to-end tests: StartKubeCluster runs a
// control plane (KubeAPI, kube-controller-manager, kube-scheduler) and
// KubeCluster.AddNode a node in a network namespace of the test (a Netns,
// or a ClusterNode's NS): containerd, kubelet and kube-proxy, run in that
// network namespace and in a mount namespace of the node's own. Tested as
// root without systemd on cgroups v1 (hybrid), with containerd 1.6 (Debian
// 12) and Kubernetes v1.34 binaries built by scripts/kube-build.sh.

package testbed

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// KubeAPIAddress is the address a KubeCluster's apiserver advertises:
	// the endpoint of the `kubernetes` Service. Every node has it on a
	// link of its own (kubeAPILink) in its network namespace, where a listener
	// of the test process forwards it to the apiserver on the test's
	// loopback: kubelet and kube-proxy use it, and so does a pod through
	// the Service's ClusterIP (kube-proxy's DNAT), as rest.InClusterConfig
	// does. It is never routed anywhere else.
	KubeAPIAddress = "10.95.0.1"
	// KubeServiceIP is the `kubernetes` Service's ClusterIP (the first
	// address of StartKubeAPI's --service-cluster-ip-range).
	KubeServiceIP = "10.96.0.1"
	// PauseImage is the sandbox image of the nodes, imported from
	// scripts/pause-image.sh's archive (PauseArchivePath). Pods may run it
	// too: it waits for SIGTERM.
	PauseImage   = "localhost/pause:" + pauseVersion
	pauseVersion = "2"
	// KubeNodePodSubnet is the default subnet of a node's CNI bridge
	// (KubeNodeOptions.PodSubnet). Each node's bridge is in its own
	// network namespace: nodes may share it.
	KubeNodePodSubnet = "10.88.0.0/24"
	// KubeNodeAddressBase is where nodes without KubeNodeOptions.IP get
	// theirs, 10.95.1.<n>/32 on kubeAPILink.
	KubeNodeAddressBase = "10.95.1.0"

	kubeServiceNet  = "10.96.0.0/16"
	kubeAPILink     = "kapi0"
	kubeNodeTimeout = 3 * time.Minute
	kubePodsGone    = time.Minute
)

// kubeNodeBins are the programs a node runs besides the kubelet and
// kube-proxy, and the CNI plugins its configuration uses.
var kubeNodeBins = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "unshare", "mount",
	"iptables", "ip6tables", "ip", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback",
	"/usr/lib/cni/portmap"}

// kubeCacheDir is scripts/kube-build.sh's cache of the Kubernetes
// binaries of version $KUBE_VERSION, else $KUBE_APISERVER_VERSION, else
// KubeAPIVersion.
func kubeCacheDir() string {
	version := cmp.Or(os.Getenv("KUBE_VERSION"), os.Getenv("KUBE_APISERVER_VERSION"), KubeAPIVersion)
	return filepath.Join(ovnedgeCache(), "kapi-"+version)
}

// ovnedgeCache is ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge.
func ovnedgeCache() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache")
	}
	return filepath.Join(cache, "ovnedge")
}

// KubeBinPath returns where the Kubernetes component (kubelet,
// kube-proxy, kube-controller-manager, kube-scheduler) is expected: the
// environment variable named after it ($KUBELET, $KUBE_PROXY, ...) if set,
// else scripts/kube-build.sh's cache,
// ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/kapi-<version>/<component>.
func KubeBinPath(component string) string {
	if p := os.Getenv(strings.ToUpper(strings.ReplaceAll(component, "-", "_"))); p != "" {
		return p
	}
	return filepath.Join(kubeCacheDir(), component)
}

// PauseArchivePath returns where the sandbox image's OCI archive is
// expected: $PAUSE_ARCHIVE if set, else scripts/pause-image.sh's cache,
// ${XDG_CACHE_HOME:-$HOME/.cache}/ovnedge/pause-<version>/pause.tar.
func PauseArchivePath() string {
	if p := os.Getenv("PAUSE_ARCHIVE"); p != "" {
		return p
	}
	return filepath.Join(ovnedgeCache(), "pause-"+pauseVersion, "pause.tar")
}

// requireKube skips (or fails, with CI=true) unless the binaries and
// files are there, logging how to get them; it reports whether they are.
func requireKube(t T, what string, bins, files []string) bool {
	t.Helper()
	missing := missingBins(bins...)
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 && os.Geteuid() == 0 {
		return true
	}
	t.Logf("testbed: %s needs %v: run `make real-node-deps` (scripts/install-deps.sh, scripts/kube-build.sh, scripts/pause-image.sh)",
		what, missing)
	Require(t, missing...)
	return false
}

// KubeCluster is a Kubernetes control plane with real nodes, made by
// StartKubeCluster: a KubeAPI advertising KubeAPIAddress with the
// ServiceAccount admission plugin on, a kube-controller-manager (every
// controller but nodeipam and cloud-node-lifecycle; it publishes
// kube-root-ca.crt and creates default ServiceAccounts) and a
// kube-scheduler, all in the test's own network namespace on loopback;
// AddNode adds nodes.
type KubeCluster struct {
	*KubeAPI
	// Client is a clientset of KubeAdmin.
	Client kubernetes.Interface

	controllers, scheduler *daemon

	mu    sync.Mutex
	nodes []*KubeNode
}

// StartKubeCluster starts the control plane (see KubeCluster) and returns
// once the apiserver is ready and the controller-manager has made the
// default ServiceAccount. Without the binaries of the control plane or of
// AddNode (make real-node-deps) the test is skipped, or fails when
// CI=true. Everything is stopped by PID when the test ends.
func StartKubeCluster(t T) *KubeCluster {
	t.Helper()
	cm, sched := KubeBinPath("kube-controller-manager"), KubeBinPath("kube-scheduler")
	// what AddNode needs too: a test skips before starting anything
	bins := append([]string{cm, sched, KubeBinPath("kubelet"), KubeBinPath("kube-proxy")}, kubeNodeBins...)
	if !requireKube(t, "StartKubeCluster", bins, []string{PauseArchivePath()}) {
		return nil
	}
	begin := time.Now()
	k := StartKubeAPIWith(t, KubeAPIOptions{AdvertiseAddress: KubeAPIAddress, ServiceAccounts: true})
	if k == nil {
		return nil
	}
	client, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatalf("testbed: client: %v", err)
		return nil
	}
	c := &KubeCluster{KubeAPI: k, Client: client}
	c.controllers = startDaemon(t, "kube-controller-manager", filepath.Join(k.Dir, "kube-controller-manager.log"), nil,
		cm, "--kubeconfig="+k.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--root-ca-file="+k.Config.CAFile,
		"--service-account-private-key-file="+filepath.Join(k.Dir, "sa.key"),
		"--controllers=*,-nodeipam,-cloud-node-lifecycle")
	stopOnCleanup(t, c.controllers)
	c.scheduler = startDaemon(t, "kube-scheduler", filepath.Join(k.Dir, "kube-scheduler.log"), nil,
		sched, "--kubeconfig="+k.Kubeconfig, "--leader-elect=false", "--secure-port=0")
	stopOnCleanup(t, c.scheduler)
	// The default ServiceAccount shows the controller-manager works.
	err = waitFor(kubeReadyTimeout, func() error {
		if err := c.scheduler.check(nil); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return c.controllers.check(err)
	})
	if err != nil {
		t.Fatalf("testbed: kube-controller-manager: no default ServiceAccount: %v%s", err,
			tails(logPaths(k.Dir, "kube-controller-manager", "kube-scheduler")))
		return nil
	}
	t.Logf("testbed: kube control plane ready in %v", time.Since(begin).Round(time.Millisecond))
	return c
}

// KubeNodeOptions shape AddNode; zero fields take the defaults noted.
type KubeNodeOptions struct {
	// Name is the node name (default: the namespace's name).
	Name string
	// IP is the node IP, which must be on an interface of the namespace
	// (default: KubeNodeAddressBase plus the node's number, put on
	// kubeAPILink).
	IP netip.Addr
	// OVSRunDir is bind-mounted on /run/openvswitch (= /var/run/openvswitch)
	// in the node's mount namespace, as the host's OVS run directory that
	// the chart's hostPath mounts (default: an empty directory).
	OVSRunDir string
	// PodSubnet is the CNI bridge's subnet (default KubeNodePodSubnet).
	PodSubnet netip.Prefix
	// CNI, when set, replaces the bridge: its network configuration list
	// and plugin binaries.
	CNI *KubeNodeCNI
}

// KubeNodeCNI is a node's own CNI network instead of the bridge.
type KubeNodeCNI struct {
	// Conflist is the network configuration list (/etc/cni/net.d).
	Conflist string
	// Plugins are plugin binaries, linked into the node's CNI bin
	// directory beside /usr/lib/cni's (whose host-local a plugin may
	// delegate IPAM to).
	Plugins []string
}

// KubeNode is a real Kubernetes node in a network namespace, made by
// KubeCluster.AddNode. Its containerd, kubelet and kube-proxy run in the
// namespace NS and in a mount namespace of the node's own, made by a
// holder process (unshare, private propagation), in which:
//
//   - /run is a fresh tmpfs (the host's netns mounts and sockets are not
//     seen; containerd's pod netns and shim sockets stay the node's), with
//     /run/openvswitch bind-mounted from OVSRunDir;
//   - /etc/cni/net.d holds the node's CNI configuration (a bridge "cni0"
//     with host-local IPAM), /var/lib/cni its IPAM state and /var/log the
//     kubelet's pod logs, bind-mounted from Dir.
//
// hostNetwork pods share NS, as on a real host. The kubelet's volume
// mounts, the containers' rootfs mounts and pod netns mounts live and die
// with the mount namespace. Its cgroups are under its own cgroupRoot.
type KubeNode struct {
	Name string
	NS   *Netns
	IP   netip.Addr
	// Dir holds the node's configuration, state and logs:
	// containerd.log, kubelet.log, kube-proxy.log; log/pods the pods'.
	Dir string
	// Socket is containerd's socket (ctr --address, crictl -r).
	Socket string

	c                                  *KubeCluster
	cgroupRoot                         string
	holder, containerd, kubelet, proxy *daemon
}

// AddNode starts a node in ns (see KubeNode) and returns once it is
// Ready, with PauseImage imported. It is torn down when the test ends:
// the Node object and the pods bound to it are deleted (so controllers
// do not make them anew) and the kubelet is given time to stop them, then
// the kubelet, kube-proxy (and its rules: kube-proxy --cleanup),
// containerd, whatever is left in the node's mount namespace and the
// holder are stopped by PID, and the node's cgroups removed.
func (c *KubeCluster) AddNode(t T, ns *Netns, o KubeNodeOptions) *KubeNode {
	t.Helper()
	kubelet, proxy, pause := KubeBinPath("kubelet"), KubeBinPath("kube-proxy"), PauseArchivePath()
	if !requireKube(t, "KubeCluster.AddNode", append([]string{kubelet, proxy}, kubeNodeBins...), []string{pause}) {
		return nil
	}
	begin := time.Now()
	c.mu.Lock()
	index := len(c.nodes) + 1
	c.mu.Unlock()
	dir := newDir(t)
	n := &KubeNode{Name: cmp.Or(o.Name, ns.Name), NS: ns, IP: o.IP, Dir: dir, c: c,
		Socket: filepath.Join(dir, "containerd.sock"), cgroupRoot: "/" + filepath.Base(dir)}
	subnet := o.PodSubnet
	if !subnet.IsValid() {
		subnet = netip.MustParsePrefix(KubeNodePodSubnet)
	}
	fail := func(format string, args ...any) *KubeNode {
		t.Fatalf("testbed: node %s: %s%s", n.Name, fmt.Sprintf(format, args...),
			tails(logPaths(dir, "mountns", "containerd", "kubelet", "kube-proxy")))
		return nil
	}
	ovsRun := o.OVSRunDir
	if ovsRun == "" {
		ovsRun = filepath.Join(dir, "openvswitch")
	}
	if err := n.makeDirs(ovsRun); err != nil {
		return fail("%v", err)
	}
	server, err := n.linkAPI(t, index)
	if err != nil {
		return fail("%v", err)
	}

	if err := n.writeConfig(server, subnet, o.CNI); err != nil {
		return fail("%v", err)
	}
	if err := n.makeCgroupRoot(); err != nil {
		return fail("cgroup root: %v", err)
	}

	// The mount namespace's holder; its cleanup tears the node down.
	n.holder = startDaemon(t, "mountns", filepath.Join(dir, "mountns.log"), nil,
		"nsenter", "--net="+filepath.Join(netnsDir, ns.Name), "--",
		"unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", n.mountScript(ovsRun))
	t.Cleanup(func() { n.stop(t) })
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	err = waitFor(readyTimeout, func() error {
		_, err := os.Stat(filepath.Join(dir, "mountns.ready"))
		return n.holder.check(err)
	})
	if err != nil {
		return fail("mount namespace: %v", err)
	}

	n.containerd = n.start(t, "containerd", "containerd", "--config", filepath.Join(dir, "containerd.toml"))
	if err := n.containerd.waitSocket(n.Socket); err != nil {
		return fail("containerd: %v", err)
	}
	n.ImportImage(t, pause, "localhost/pause")
	ctrdUp := time.Since(begin)

	n.kubelet = n.startKubelet(t)
	n.proxy = n.start(t, "kube-proxy", proxy, "--kubeconfig="+filepath.Join(dir, "node.kubeconfig"),
		"--hostname-override="+n.Name, "--proxy-mode=iptables", "--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256")

	registered, err := n.waitReady(begin)
	if err != nil {
		return fail("%v", err)
	}
	t.Logf("testbed: node %s (%s, netns %s) Ready in %v (containerd and pause image %v, registered %v; dir %s)",
		n.Name, n.IP, ns.Name, time.Since(begin).Round(time.Millisecond), ctrdUp.Round(time.Millisecond),
		registered.Round(time.Millisecond), dir)
	return n
}

// makeDirs makes the node's directories (its OVS run directory among
// them) and the host's mount points for the node's own (what installing
// CNI plugins makes on a host).
func (n *KubeNode) makeDirs(ovsRun string) error {
	for _, d := range []string{ovsRun, "cni-conf", "cni-lib", "cni-bin", "log", "kubelet", "volume-plugins", "containerd",
		"/etc/cni/net.d", "/var/lib/cni"} {
		if !filepath.IsAbs(d) {
			d = filepath.Join(n.Dir, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// linkAPI gives the node's namespace the apiserver, forwarded, and
// returns its URL there: KubeAPIAddress on a link of its own (with the
// node IP, the index-th of KubeNodeAddressBase, when it has none of its
// own) and, unless the namespace routes it, the service network there
// too, so that a connection to a ClusterIP has a route for kube-proxy's
// DNAT to rewrite. (A veth whose peer is down: no dummy module in some
// kernels.)
func (n *KubeNode) linkAPI(t T, index int) (string, error) {
	t.Helper()
	ns := n.NS.Name
	mustRun(t, nil, "ip", "-n", ns, "link", "add", kubeAPILink, "type", "veth", "peer", "name", kubeAPILink+"p")
	mustRun(t, nil, "ip", "-n", ns, "addr", "add", KubeAPIAddress+"/32", "dev", kubeAPILink)
	if !n.IP.IsValid() {
		b := netip.MustParseAddr(KubeNodeAddressBase).As4()
		b[3] = byte(index)
		n.IP = netip.AddrFrom4(b)
		mustRun(t, nil, "ip", "-n", ns, "addr", "add", n.IP.String()+"/32", "dev", kubeAPILink)
	}
	mustRun(t, nil, "ip", "-n", ns, "link", "set", kubeAPILink, "up")
	if _, err := run("ip", "-n", ns, "route", "get", KubeServiceIP); err != nil {
		mustRun(t, nil, "ip", "-n", ns, "route", "add", kubeServiceNet, "dev", kubeAPILink)
	}
	u, err := url.Parse(n.c.URL)
	if err != nil {
		return "", fmt.Errorf("apiserver URL %s: %w", n.c.URL, err)
	}
	n.NS.ForwardTo(t, KubeAPIAddress+":"+u.Port(), u.Host)
	return "https://" + KubeAPIAddress + ":" + u.Port(), nil
}

// waitReady waits until the node's Node is Ready while its containerd,
// kubelet and kube-proxy run, and returns when (since begin) the Node was
// first registered.
func (n *KubeNode) waitReady(begin time.Time) (registered time.Duration, err error) {
	err = waitFor(kubeNodeTimeout, func() error {
		for _, d := range []*daemon{n.containerd, n.kubelet, n.proxy} {
			if err := d.check(nil); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		node, err := n.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if registered == 0 {
			registered = time.Since(begin)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s not Ready: %s: %s", n.Name, cond.Reason, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition", n.Name)
	})
	return registered, err
}

// AddClusterNode makes a StartCluster node a Kubernetes node: its name,
// its node IP (on breth0) and its OVS run directory.
func (c *KubeCluster) AddClusterNode(t T, cn *ClusterNode) *KubeNode {
	t.Helper()
	return c.AddNode(t, cn.NS, KubeNodeOptions{Name: cn.Name, IP: cn.IP, OVSRunDir: cn.RunDir})
}

// AddOVNClusterNode is AddClusterNode with the node's pods on OVN, as
// OVN-Kubernetes plugs them: plugin is examples/ovncni's binary (built by
// the caller, named ovncni), which puts each pod on br-int and on the
// node's logical switch with an address of cn.Subnet and one of
// cn.Subnet6 from host-local (dual-stack, as the cluster; .128 to .250 and
// ::80 to ::fa: the testbed's own pods, AddPod, take the first ones) and
// the switch's router port as its gateway.
func (c *KubeCluster) AddOVNClusterNode(t T, cn *ClusterNode, plugin string) *KubeNode {
	t.Helper()
	conf, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "ovn", "plugins": []any{map[string]any{
		"type": "ovncni", "nbAddress": cn.c.OVN.NB, "ovsdb": cn.DB, "bridge": "br-int", "logicalSwitch": cn.Name, "mtu": 1400,
		"ipam": map[string]any{"type": "host-local",
			"routes": []any{map[string]string{"dst": "0.0.0.0/0"}, map[string]string{"dst": "::/0"}},
			"ranges": []any{podRange(cn.Subnet), podRange(cn.Subnet6)}}}}})
	if err != nil {
		t.Fatalf("testbed: node %s: CNI configuration: %v", cn.Name, err)
	}
	return c.AddNode(t, cn.NS, KubeNodeOptions{Name: cn.Name, IP: cn.IP, OVSRunDir: cn.RunDir,
		CNI: &KubeNodeCNI{Conflist: string(conf), Plugins: []string{plugin}}})
}

// podRange is host-local's range of subnet for the kubelet's pods: the
// 128th to the 250th address, the router port's (the first) the gateway.
func podRange(subnet netip.Prefix) []any {
	at := func(i byte) string {
		b := subnet.Masked().Addr().AsSlice()
		b[len(b)-1] = i
		a, _ := netip.AddrFromSlice(b)
		return a.String()
	}
	return []any{map[string]string{"subnet": subnet.Masked().String(), "rangeStart": at(128), "rangeEnd": at(250), "gateway": at(1)}}
}

// startKubelet starts the node's kubelet.
func (n *KubeNode) startKubelet(t T) *daemon {
	t.Helper()
	return n.start(t, "kubelet", KubeBinPath("kubelet"), "--config="+filepath.Join(n.Dir, "kubelet-config.yaml"),
		"--kubeconfig="+filepath.Join(n.Dir, "node.kubeconfig"), "--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--hostname-override="+n.Name, "--node-ip="+n.IP.String())
}

// KillKubelet kills the node's kubelet (SIGKILL, by its PID) and waits
// until it is reaped, as a machine dying would stop it: nothing restarts
// the node's containers or reports their status any more, while
// containerd, kube-proxy and the containers still run (a test kills what
// it wants of them). It returns the PID.
func (n *KubeNode) KillKubelet(t T) int {
	t.Helper()
	if err := n.kubelet.kill(); err != nil {
		t.Fatalf("testbed: node %s: %v", n.Name, err)
	}
	return n.kubelet.cmd.Process.Pid
}

// RestartKubelet starts a killed kubelet (KillKubelet) again, with the
// same configuration and state directory, as a rebooted machine would;
// it returns once the Node is Ready again, by a status the new kubelet
// posted.
func (n *KubeNode) RestartKubelet(t T) {
	t.Helper()
	if n.kubelet.alive() {
		t.Fatalf("testbed: node %s: RestartKubelet of a running kubelet", n.Name)
	}
	started := time.Now()
	n.kubelet = n.startKubelet(t)
	err := waitFor(kubeNodeTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		node, err := n.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return n.kubelet.check(err)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue &&
				cond.LastHeartbeatTime.After(started.Add(-time.Second)) {
				return n.kubelet.check(nil)
			}
		}
		return n.kubelet.check(fmt.Errorf("node %s not Ready since the restart: %+v", n.Name, node.Status.Conditions))
	})
	if err != nil {
		t.Fatalf("testbed: node %s: restarted kubelet: %v%s", n.Name, err, tails(logPaths(n.Dir, "kubelet")))
	}
}

// mountScript sets the node's mount namespace up (see KubeNode), then
// writes mountns.ready and holds the namespace.
func (n *KubeNode) mountScript(ovsRun string) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	d := func(s string) string { return q(filepath.Join(n.Dir, s)) }
	return strings.Join([]string{
		// the other namespaces' mounts would be kept alive by this copy
		"umount -R -l /run/netns 2>/dev/null || true",
		"mount -t tmpfs -o mode=0755 tmpfs /run",
		"mkdir -p /run/openvswitch /run/netns",
		"mount --bind " + q(ovsRun) + " /run/openvswitch",
		"mount --bind " + d("cni-conf") + " /etc/cni/net.d",
		"mount --bind " + d("cni-lib") + " /var/lib/cni",
		"mount --bind " + d("log") + " /var/log",
		"touch " + d("mountns.ready"),
		"exec sleep infinity",
	}, "\n")
}

// start runs argv in the node's network and mount namespaces, logging to
// <Dir>/<name>.log. The node's cleanup stops it.
func (n *KubeNode) start(t T, name string, argv ...string) *daemon {
	t.Helper()
	return startDaemon(t, name, filepath.Join(n.Dir, name+".log"), nil, append(n.enter(), argv...)...)
}

// enter is the nsenter prefix of a command run in the node's namespaces.
func (n *KubeNode) enter() []string {
	pid := strconv.Itoa(n.holder.cmd.Process.Pid)
	return []string{"nsenter", "--mount=/proc/" + pid + "/ns/mnt", "--net=/proc/" + pid + "/ns/net", "--"}
}

// Exec runs argv in the node's network and mount namespaces (as a
// process on the node's host) and returns its trimmed stdout, failing
// the test on error.
func (n *KubeNode) Exec(t T, argv ...string) string {
	t.Helper()
	return mustRun(t, nil, append(n.enter(), argv...)...)
}

// ContainerPID returns the host PID of the running container id (a
// Pod's containerStatuses containerID, "containerd://" prefix or not),
// as the node's containerd reports it.
func (n *KubeNode) ContainerPID(id string) (int, error) {
	id = strings.TrimPrefix(id, "containerd://")
	out, err := run("ctr", "-n", "k8s.io", "--address", n.Socket, "tasks", "ls")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("node %s: no running task of container %s:\n%s", n.Name, id, out)
}

// PodNetns names the network namespace of the running container id
// (see ContainerPID) so that the test can work in it as in its own:
// `ip netns attach`, undone at cleanup (the pod keeps its namespace).
func (n *KubeNode) PodNetns(t T, id string) *Netns {
	t.Helper()
	pid, err := n.ContainerPID(id)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	ns := &Netns{Name: "ovcq" + randomHex(t)}
	mustRun(t, nil, "ip", "netns", "attach", ns.Name, strconv.Itoa(pid))
	t.Cleanup(func() { _, _ = run("ip", "netns", "del", ns.Name) })
	return ns
}

// ImportImage imports an OCI or docker archive into the node's containerd
// (namespace k8s.io), as baseName:<tag> for an OCI archive whose index
// names its manifests by tag (scripts/image.sh, scripts/pause-image.sh).
// Pods use it with imagePullPolicy Never or IfNotPresent.
func (n *KubeNode) ImportImage(t T, archive, baseName string) {
	t.Helper()
	argv := []string{"ctr", "-n", "k8s.io", "--address", n.Socket, "images", "import"}
	if baseName != "" {
		argv = append(argv, "--base-name", baseName)
	}
	out := mustRun(t, []string{n.containerd.log}, append(argv, archive)...)
	if !strings.Contains(out, "unpacking") {
		// ctr imports nothing, silently, from an archive without names
		t.Fatalf("testbed: node %s: ctr imported nothing from %s (no org.opencontainers.image.ref.name annotation?): %q",
			n.Name, archive, out)
	}
}

// writeConfig writes the node's kubeconfig (KubeAdmin's token, server the
// forwarded KubeAPIAddress), containerd, kubelet and CNI configuration:
// cni's (the bridge on subnet when nil) and its bin directory.
func (n *KubeNode) writeConfig(server string, subnet netip.Prefix, cni *KubeNodeCNI) error {
	if err := n.linkCNIPlugins(cni); err != nil {
		return err
	}
	k := n.c.KubeAPI
	if err := writeKubeconfig(filepath.Join(n.Dir, "node.kubeconfig"), server, k.Config.CAFile, KubeAdmin, k.Config.BearerToken); err != nil {
		return err
	}
	dir := n.Dir
	files := map[string]string{
		"containerd.toml": `version = 2
root = "` + filepath.Join(dir, "containerd", "root") + `"
state = "` + filepath.Join(dir, "containerd", "state") + `"
[grpc]
  address = "` + n.Socket + `"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "` + PauseImage + `"
    disable_apparmor = true
    # root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "` + filepath.Join(dir, "cni-bin") + `"
      conf_dir = "/etc/cni/net.d"
`,
		"kubelet-config.yaml": `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://` + n.Socket + `
cgroupDriver: cgroupfs
cgroupRoot: ` + n.cgroupRoot + `
failSwapOn: false
failCgroupV1: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
authorization: {mode: Webhook}
clusterDNS: []
clusterDomain: cluster.local
staticPodPath: ""
resolvConf: ""
volumePluginDir: ` + filepath.Join(dir, "volume-plugins") + `
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`,
		filepath.Join("cni-conf", "10-testbed.conflist"): `{
  "cniVersion": "0.4.0",
  "name": "testbed",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + subnet.Masked().String() + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`,
	}
	if cni != nil {
		delete(files, filepath.Join("cni-conf", "10-testbed.conflist"))
		files[filepath.Join("cni-conf", "10-node.conflist")] = cni.Conflist
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// linkCNIPlugins fills the node's CNI bin directory: /usr/lib/cni's
// plugins and cni's.
func (n *KubeNode) linkCNIPlugins(cni *KubeNodeCNI) error {
	plugins, err := filepath.Glob("/usr/lib/cni/*")
	if err != nil {
		return err
	}
	if cni != nil {
		plugins = append(plugins, cni.Plugins...)
	}
	for _, p := range plugins {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if err := os.Symlink(abs, filepath.Join(n.Dir, "cni-bin", filepath.Base(p))); err != nil && !os.IsExist(err) {
			return fmt.Errorf("CNI plugin %s: %w", p, err)
		}
	}
	return nil
}

// cgroupHierarchies are the mounted cgroup hierarchies' roots.
func cgroupHierarchies() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/cgroup.procs")
	}
	for i, r := range roots {
		roots[i] = filepath.Dir(r)
	}
	return roots
}

// makeCgroupRoot creates the node's cgroupRoot in every hierarchy (the
// kubelet requires it to exist): two kubelets under one cgroup root would
// each take the other's pods for orphans.
func (n *KubeNode) makeCgroupRoot() error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, n.cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if filepath.Base(h) == "cpuset" {
			// a v1 cpuset cgroup takes no task before it has cpus and mems
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err == nil {
					err = os.WriteFile(filepath.Join(d, f), v, 0o644)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the node's cgroups, deepest first.
func (n *KubeNode) removeCgroupRoot() error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, n.cgroupRoot), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			err := waitFor(5*time.Second, func() error {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
					return fmt.Errorf("rmdir %s: %w", d, err)
				}
				return nil
			})
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// stop tears the node down (see AddNode).
func (n *KubeNode) stop(t T) {
	c := n.c
	if n.kubelet != nil && n.kubelet.alive() && c.apiserver.alive() {
		if err := n.deletePods(); err != nil {
			t.Errorf("testbed: node %s: %v", n.Name, err)
		}
	}
	for _, d := range []*daemon{n.kubelet, n.proxy} {
		if d != nil {
			if err := d.terminate(); err != nil {
				t.Errorf("testbed: node %s: %v", n.Name, err)
			}
		}
	}
	if n.proxy != nil {
		if _, err := run(append(n.enter(), KubeBinPath("kube-proxy"), "--cleanup")...); err != nil {
			t.Errorf("testbed: node %s: kube-proxy --cleanup: %v", n.Name, err)
		}
	}
	if n.containerd != nil && n.containerd.alive() {
		n.removeContainers(t)
		if err := n.containerd.terminate(); err != nil {
			t.Errorf("testbed: node %s: %v", n.Name, err)
		}
	}
	// Shims and containers left behind: every process in the node's mount
	// namespace but the holder, which goes last.
	if n.holder != nil {
		for _, pid := range n.mountNSProcesses() {
			if pid != n.holder.cmd.Process.Pid {
				t.Logf("testbed: node %s: killing leftover pid %d (%s)", n.Name, pid, comm(pid))
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if err := n.holder.terminate(); err != nil {
			t.Errorf("testbed: node %s: %v", n.Name, err)
		}
	}
	err := waitFor(readyTimeout, func() error {
		if pids := n.mountNSProcesses(); len(pids) > 0 {
			return fmt.Errorf("processes still in the mount namespace: %v", pids)
		}
		return n.removeCgroupRoot()
	})
	if err != nil {
		t.Errorf("testbed: node %s: %v", n.Name, err)
	}
}

// deletePods deletes the Node (so that DaemonSets leave it alone and
// nothing is scheduled there) and every pod bound to it, and waits until
// the kubelet has stopped their containers.
func (n *KubeNode) deletePods() error {
	ctx, cancel := context.WithTimeout(context.Background(), kubePodsGone)
	defer cancel()
	pods := n.c.Client.CoreV1().Pods(metav1.NamespaceAll)
	err := n.c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node: %w", err)
	}
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for _, p := range list.Items {
		err := n.c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	// The kubelet stops a force-deleted pod's containers and sandbox.
	err = waitFor(kubePodsGone, func() error {
		out, err := run("ctr", "-n", "k8s.io", "--address", n.Socket, "tasks", "ls", "-q")
		if err != nil {
			return err
		}
		if out != "" {
			return fmt.Errorf("tasks still running: %s", strings.ReplaceAll(out, "\n", " "))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pods not stopped: %w", err)
	}
	return nil
}

// removeContainers kills and deletes what containerd still runs.
func (n *KubeNode) removeContainers(t T) {
	ctr := []string{"ctr", "-n", "k8s.io", "--address", n.Socket}
	tasks, _ := run(append(ctr, "tasks", "ls", "-q")...)
	for _, id := range strings.Fields(tasks) {
		_, _ = run(append(ctr, "tasks", "kill", "-s", "SIGKILL", id)...)
		_ = waitFor(5*time.Second, func() error {
			_, err := run(append(ctr, "tasks", "delete", id)...)
			return err
		})
	}
	containers, _ := run(append(ctr, "containers", "ls", "-q")...)
	if ids := strings.Fields(containers); len(ids) > 0 {
		if _, err := run(append(append(ctr, "containers", "delete"), ids...)...); err != nil {
			t.Logf("testbed: node %s: %v", n.Name, err)
		}
	}
}

// mountNSProcesses returns the PIDs of the processes in the node's mount
// namespace (the holder's): containerd, kubelet, kube-proxy, shims and
// containers not in a mount namespace of their own.
func (n *KubeNode) mountNSProcesses() []int {
	if n.holder == nil {
		return nil
	}
	self := "/proc/" + strconv.Itoa(n.holder.cmd.Process.Pid) + "/ns/mnt"
	want, err := os.Readlink(self)
	if err != nil {
		return nil // the holder is gone, and the namespace with the last process in it
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && ns == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// comm is pid's command name, for messages.
func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// writeKubeconfig writes a kubeconfig file of user with a bearer token.
func writeKubeconfig(path, server, ca, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testbed"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testbed"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: user}
	cfg.CurrentContext = "testbed"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
