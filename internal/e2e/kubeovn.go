package e2e

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/testbed"
)

// ovnProvider is the provider of Kube-OVN's default network.
const ovnProvider = "ovn"

// KubeOVNClusterSubnets is the leader's --cluster-subnets on a cluster
// with Kube-OVN's ovn-default (StartKubeOVN): its pods are pods too.
const KubeOVNClusterSubnets = clusterSubnets + "," + testbed.KubeOVNDefaultCIDR + "/24"

// kubeOVNState is what the harness's Kube-OVN parts keep, shared by
// every With copy of the Env.
type kubeOVNState struct {
	subnets map[string]testbed.KubeOVNSubnet
	// lbsvc are the running lb-svc pods by Deployment namespace/name.
	lbsvc map[string]*LBSvcPod
}

// StartKubeOVN adds Kube-OVN's default VPC to the cluster: the router
// ovn-cluster and the subnets (ovn-default when none is given) in the NB
// (testbed's AddKubeOVNSubnets) and as kubeovn.io Subnets of provider
// ovn, and attaches ovnedge's cluster-wide Load_Balancer_Group to every
// subnet switch, as kube-ovn-controller attaches its VPC's load balancers
// to every subnet: the ClusterIPs ovnedge's leader writes are then served
// on the Kube-OVN subnets too. Pods created with the annotation
// ovn.kubernetes.io/logical_switch=<subnet> are plugged into that subnet
// (CreatePod), and the lb-svc Deployments ovnedge creates get their pods
// from SyncLBSvc. Subnets added before are skipped.
func (e *Env) StartKubeOVN(subnets ...testbed.KubeOVNSubnet) {
	e.t.Helper()
	if len(subnets) == 0 {
		subnets = []testbed.KubeOVNSubnet{testbed.KubeOVNDefault}
	}
	e.mu.Lock()
	subnets = slices.DeleteFunc(slices.Clone(subnets), func(s testbed.KubeOVNSubnet) bool { _, ok := e.kubeovn.subnets[s.Name]; return ok })
	for _, s := range subnets {
		e.kubeovn.subnets[s.Name] = s
	}
	e.mu.Unlock()
	if len(subnets) == 0 {
		return // started before (a shared cluster's second test)
	}
	e.AddKubeOVNSubnets(subnets...)
	for _, s := range subnets {
		if err := e.applier.apply(e.ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubeovn.io/v1", "kind": "Subnet", "metadata": map[string]any{"name": s.Name},
			"spec": map[string]any{"protocol": "IPv4", "provider": ovnProvider, "cidrBlock": s.CIDR.String(),
				"gateway": s.Gateway.String(), "excludeIps": []any{s.Gateway.String()}},
		}}); err != nil {
			e.t.Fatalf("e2e: Subnet %s: %v", s.Name, err)
		}
	}
	var group string
	e.Eventually(Timeout, "ovnedge's "+lbsvc.DefaultClusterLBGroup, func() (err error) {
		group, err = e.OVN.NbctlErr("--bare", "--columns=_uuid", "find", "Load_Balancer_Group", "name="+lbsvc.DefaultClusterLBGroup)
		if err == nil && group == "" {
			err = errors.New("not written yet")
		}
		return err
	})
	for _, s := range subnets {
		e.OVN.Nbctl("add", "Logical_Switch", s.Name, "load_balancer_group", group)
	}
}

// KubeOVNPod is ServerPod on Kube-OVN's ovn-default (StartKubeOVN)
// instead of its node's switch.
func KubeOVNPod(namespace, name, node string, labels map[string]string, ports ...int32) *corev1.Pod {
	p := ServerPod(namespace, name, node, labels, ports...)
	p.Annotations = map[string]string{annotationLogicalSwitch: testbed.KubeOVNDefaultSubnet}
	return p
}

// Seed004 is the manifests of Kube-OVN's LoadBalancer Service example
// (kubeovn/docs, docs/guide/loadbalancer-service.en.md: a
// NetworkAttachmentDefinition, the
// Subnet attach-subnet and the Service test-service, as Kube-OVN's
// documentation writes them), relative to the repository root.
const Seed004 = "daemon/testdata/kubeovn/seed004.yaml"

// kubeOVNSubnet returns the Kube-OVN subnet pod p asks for with
// ovn.kubernetes.io/logical_switch, "" for none (the node switch).
func (e *Env) kubeOVNSubnet(p *corev1.Pod) (string, error) {
	name := p.Annotations[annotationLogicalSwitch]
	if name == "" {
		return "", nil
	}
	e.mu.Lock()
	_, ok := e.kubeovn.subnets[name]
	e.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("pod %s/%s: no Kube-OVN subnet %q (StartKubeOVN)", p.Namespace, p.Name, name)
	}
	return name, nil
}

// kubeOVNAnnotations are the annotations kube-ovn-controller writes on a
// pod of provider (its default network "ovn", or an attachment
// "<nad>.<namespace>") for interface address ip/cidr.
func kubeOVNAnnotations(provider, subnet string, ip netip.Addr, cidr netip.Prefix, gw netip.Addr, mac string) map[string]string {
	p := provider + ".kubernetes.io/"
	return map[string]string{p + "allocated": "true", p + "cidr": cidr.String(), p + "gateway": gw.String(),
		p + "ip_address": ip.String(), p + "logical_switch": subnet, p + "mac_address": mac, p + "pod_nic_type": "veth-pair"}
}

// LBSvcPod is the running pod of an lb-svc Deployment.
type LBSvcPod struct {
	// Namespace, Name and Deployment name the Pod object and its
	// Deployment; Hash is the pod template's hash (pod-template-hash).
	Namespace, Name, Deployment, Hash string
	// Pod is its sandbox: eth0 on a Kube-OVN subnet, net1 (MAC Net1MAC)
	// on the external segment.
	Pod     *testbed.Pod
	Net1MAC string
	// LBIP is the attachment address Kube-OVN gave net1 (with the
	// subnet's length), Gateway the attachment subnet's gateway.
	LBIP    netip.Prefix
	Gateway netip.Addr
	// Agent is the container's process, Argv what it runs, Log its
	// output, PodInfo the downward-API directory mounted at its
	// mountPath; Restarts counts the kubelet's restarts of the container.
	Agent    *testbed.Process
	Argv     []string
	Log      string
	PodInfo  string
	Restarts int
	spec     corev1.PodSpec
}

// SyncLBSvc plays the controllers and the kubelet for the lb-svc
// Deployments ovnedge manages (label app.kubernetes.io/managed-by=
// ovnedge), once: for each Deployment whose running pod is missing (its
// Pod object was deleted) or of an older template (Recreate), the old pod
// goes and a new one comes; pods of deleted Deployments go; an exited
// container is restarted (restartPolicy Always). A new pod is what the
// Deployment and ReplicaSet controllers, the scheduler (nodeSelector
// against the Node labels), Kube-OVN and Multus, and the kubelet make of
// the template:
//
//   - a Pod object <deployment>-<template hash>-<random> on the node;
//   - eth0 on the Kube-OVN subnet of its ovn.kubernetes.io/logical_switch
//     annotation (ovn-default without one), net1 on the external segment
//     for the NetworkAttachmentDefinition of k8s.v1.cni.cncf.io/networks
//     (Multus; the segment stands for the macvlan master), at the
//     <provider>.kubernetes.io/ip_address address of the provider's
//     Subnet (<provider>.kubernetes.io/logical_switch, else the Subnet
//     whose spec.provider is the provider), and Kube-OVN's address
//     annotations of both written to the Pod;
//   - its downwardAPI volumes written (metadata.annotations, in the
//     kubelet's key="value" format) and mounted at their mountPath in a
//     mount namespace of the container's own;
//   - the container's command and args, exactly, run inside the pod's
//     network namespace, with the image's binary (this build of ovnedge)
//     first on PATH and the container's env;
//   - a Running, Ready status with the pod IP.
//
// It returns the running pods by Deployment namespace/name. It must be
// called from the test's goroutine (the testbed fails the test on error).
func (e *Env) SyncLBSvc() map[string]*LBSvcPod {
	e.t.Helper()
	dps, err := e.CS.AppsV1().Deployments("").List(e.ctx, metav1.ListOptions{LabelSelector: kubeovn.LabelManagedBy + "=" + kubeovn.ManagedBy})
	if err != nil {
		e.t.Fatalf("e2e: list lb-svc Deployments: %v", err)
	}
	want := map[string]*appsv1.Deployment{}
	for i := range dps.Items {
		dp := &dps.Items[i]
		want[dp.Namespace+"/"+dp.Name] = dp
	}
	e.mu.Lock()
	running := maps.Clone(e.kubeovn.lbsvc)
	e.mu.Unlock()
	for key, p := range running {
		dp := want[key]
		switch {
		case dp == nil || templateHash(dp) != p.Hash:
		case !e.podExists(p.Namespace, p.Name):
		case !p.Agent.Alive():
			e.restartContainer(p)
			continue
		default:
			continue
		}
		e.stopLBSvcPod(p)
		e.mu.Lock()
		delete(e.kubeovn.lbsvc, key)
		e.mu.Unlock()
	}
	keys := slices.Sorted(maps.Keys(want))
	for _, key := range keys {
		e.mu.Lock()
		_, ok := e.kubeovn.lbsvc[key]
		e.mu.Unlock()
		if ok {
			continue
		}
		p, err := e.startLBSvcPod(want[key])
		if err != nil {
			e.t.Logf("e2e: lb-svc pod of Deployment %s: %v", key, err)
			continue
		}
		e.mu.Lock()
		e.kubeovn.lbsvc[key] = p
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.kubeovn.lbsvc)
}

// WaitLBSvcPod syncs (SyncLBSvc) until Deployment namespace/name has a
// running pod other than the pods not (a re-created one) and returns it.
func (e *Env) WaitLBSvcPod(namespace, name string, not ...*LBSvcPod) *LBSvcPod {
	e.t.Helper()
	var p *LBSvcPod
	e.Eventually(Timeout, "a running pod of Deployment "+namespace+"/"+name, func() error {
		p = e.SyncLBSvc()[namespace+"/"+name]
		if p == nil || slices.Contains(not, p) {
			return errors.New("none yet")
		}
		return nil
	})
	return p
}

func (e *Env) podExists(namespace, name string) bool {
	_, err := e.CS.CoreV1().Pods(namespace).Get(e.ctx, name, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// templateHash is the pod template's digest, as the Deployment
// controller's pod-template-hash (not its exact algorithm).
func templateHash(dp *appsv1.Deployment) string {
	b, _ := json.Marshal(dp.Spec.Template)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}

// schedule returns the first node (by name) whose labels match sel.
func (e *Env) schedule(sel map[string]string) (string, error) {
	nodes, err := e.CS.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no node matches the node selector %v", sel)
	}
	slices.Sort(names)
	return names[0], nil
}

// attachment returns the provider "<nad>.<namespace>" of the pod
// template's one k8s.v1.cni.cncf.io/networks entry "<namespace>/<nad>"
// and the Subnet that addresses it.
func (e *Env) attachment(ann map[string]string) (string, *kubeovn.Subnet, error) {
	nets := ann[kubeovn.AnnotationNetworks]
	ns, nad, ok := strings.Cut(nets, "/")
	if !ok || strings.Contains(nets, ",") {
		return "", nil, fmt.Errorf("annotation %s=%q: want one <namespace>/<name>", kubeovn.AnnotationNetworks, nets)
	}
	if _, err := e.Dyn.Resource(kubeovn.NADResource).Namespace(ns).Get(e.ctx, nad, metav1.GetOptions{}); err != nil {
		return "", nil, fmt.Errorf("NetworkAttachmentDefinition %s: %w", nets, err)
	}
	provider := nad + "." + ns
	list, err := e.Dyn.Resource(kubeovn.SubnetResource).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return "", nil, err
	}
	name := ann[kubeovn.LogicalSwitchAnnotation(provider)]
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].GetName() < list.Items[j].GetName() })
	for i := range list.Items {
		s, err := kubeovn.SubnetFromUnstructured(&list.Items[i])
		if err != nil {
			return "", nil, err
		}
		if (name != "" && s.Name == name) || (name == "" && s.Spec.Provider == provider) {
			return provider, s, nil
		}
	}
	return "", nil, fmt.Errorf("no Subnet for provider %s (logical_switch %q)", provider, name)
}

// startLBSvcPod makes and runs dp's pod (see SyncLBSvc).
func (e *Env) startLBSvcPod(dp *appsv1.Deployment) (*LBSvcPod, error) {
	e.t.Helper()
	tpl := dp.Spec.Template
	if len(tpl.Spec.Containers) != 1 {
		return nil, fmt.Errorf("%d containers, the harness runs one", len(tpl.Spec.Containers))
	}
	provider, subnet, err := e.attachment(tpl.Annotations)
	if err != nil {
		return nil, err
	}
	cidr, err1 := netip.ParsePrefix(strings.Split(subnet.Spec.CIDRBlock, ",")[0])
	gw, err2 := netip.ParseAddr(strings.Split(subnet.Spec.Gateway, ",")[0])
	ip, err3 := netip.ParseAddr(tpl.Annotations[kubeovn.IPAddressAnnotation(provider)])
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("attachment address from Subnet %s: %w", subnet.Name, err)
	}
	if !cidr.Contains(ip) {
		return nil, fmt.Errorf("address %s outside Subnet %s (%s)", ip, subnet.Name, cidr)
	}
	node, err := e.schedule(tpl.Spec.NodeSelector)
	if err != nil {
		return nil, err
	}
	hash := templateHash(dp)
	sw := cmp.Or(tpl.Annotations[annotationLogicalSwitch], testbed.KubeOVNDefaultSubnet)
	e.mu.Lock()
	def, ok := e.kubeovn.subnets[sw]
	e.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no Kube-OVN subnet %q (StartKubeOVN)", sw)
	}

	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: dp.Namespace,
		Name:        dp.Name + "-" + hash + "-" + podSuffix(),
		Labels:      maps.Clone(tpl.Labels),
		Annotations: maps.Clone(tpl.Annotations)},
		Spec: *tpl.Spec.DeepCopy()}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels["pod-template-hash"] = hash
	obj.Spec.NodeName = node
	created, err := e.CS.CoreV1().Pods(obj.Namespace).Create(e.ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}

	pod := e.AddPod(node, obj.Namespace, obj.Name, testbed.ClusterPodOptions{Subnet: sw})
	mac := e.AttachSegment(pod, "net1")
	p := &LBSvcPod{Namespace: obj.Namespace, Name: obj.Name, Deployment: dp.Name, Hash: hash, Pod: pod, Net1MAC: mac,
		LBIP: netip.PrefixFrom(ip, cidr.Bits()), Gateway: gw, spec: created.Spec}
	ann := created.Annotations
	if ann == nil {
		ann = map[string]string{}
	}
	maps.Copy(ann, kubeOVNAnnotations(ovnProvider, sw, pod.IP, def.CIDR, def.Gateway, pod.MAC))
	maps.Copy(ann, kubeOVNAnnotations(provider, subnet.Name, ip, cidr, gw, mac))
	ann["ovn.kubernetes.io/routed"] = "true"
	created.Annotations = ann
	if created, err = e.CS.CoreV1().Pods(obj.Namespace).Update(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.stopLBSvcPod(p)
		return nil, fmt.Errorf("pod annotations: %w", err)
	}

	dir := filepath.Join(e.Kube.Dir, "pods", obj.Name)
	if err := e.writeVolumes(p, created, dir); err != nil {
		e.stopLBSvcPod(p)
		return nil, err
	}
	p.Log = filepath.Join(dir, "container.log")
	if err := e.startContainer(p, dir); err != nil {
		e.stopLBSvcPod(p)
		return nil, err
	}
	now := metav1.Now()
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: pod.IP.String(), PodIPs: []corev1.PodIP{{IP: pod.IP.String()}},
		HostIP: e.Node(node).IP.String(), StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if _, err := e.CS.CoreV1().Pods(obj.Namespace).UpdateStatus(e.ctx, created, metav1.UpdateOptions{}); err != nil {
		e.t.Logf("e2e: pod %s/%s status: %v", obj.Namespace, obj.Name, err)
	}
	return p, nil
}

// writeVolumes writes the pod's downwardAPI volumes under dir/<volume>:
// the files of metadata.annotations and metadata.labels fields, in the
// kubelet's format (sorted key="value" lines, Go-quoted values).
func (e *Env) writeVolumes(p *LBSvcPod, pod *corev1.Pod, dir string) error {
	for _, v := range pod.Spec.Volumes {
		if v.DownwardAPI == nil {
			return fmt.Errorf("volume %s: the harness writes downwardAPI volumes only", v.Name)
		}
		vdir := filepath.Join(dir, v.Name)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		for _, it := range v.DownwardAPI.Items {
			var m map[string]string
			switch it.FieldRef.FieldPath {
			case "metadata.annotations":
				m = pod.Annotations
			case "metadata.labels":
				m = pod.Labels
			default:
				return fmt.Errorf("volume %s: field %s not written by the harness", v.Name, it.FieldRef.FieldPath)
			}
			var b strings.Builder
			for _, k := range slices.Sorted(maps.Keys(m)) {
				fmt.Fprintf(&b, "%s=%q\n", k, m[k])
			}
			if err := os.WriteFile(filepath.Join(vdir, it.Path), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
		p.PodInfo = vdir
	}
	return nil
}

// startContainer runs the pod's one container in its network namespace
// and a mount namespace of its own in which each volume is mounted at
// its mountPath: the directory above a mountPath is overlaid (upper layer
// under dir) so that the mount point exists without touching the host.
func (e *Env) startContainer(p *LBSvcPod, dir string) error {
	e.t.Helper()
	c := p.spec.Containers[0]
	script := []string{"set -e"}
	for i, m := range c.VolumeMounts {
		parent := filepath.Dir(m.MountPath)
		upper, work := filepath.Join(dir, "overlay", strconv.Itoa(i), "upper"), filepath.Join(dir, "overlay", strconv.Itoa(i), "work")
		if err := os.MkdirAll(filepath.Join(upper, filepath.Base(m.MountPath)), 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		ro := ""
		if m.ReadOnly {
			ro = ",ro"
		}
		script = append(script,
			fmt.Sprintf("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s", parent, upper, work, parent),
			fmt.Sprintf("mount --bind %s %s", filepath.Join(dir, m.Name), m.MountPath),
			fmt.Sprintf("mount -o remount,bind%s %s", ro, m.MountPath))
	}
	script = append(script, `exec "$@"`)
	argv := append([]string{"ip", "netns", "exec", p.Pod.Netns.Name, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", strings.Join(script, "\n"), c.Name}, c.Command...)
	argv = append(argv, c.Args...)
	env := []string{"PATH=" + filepath.Dir(e.Bin) + ":" + os.Getenv("PATH")}
	for _, v := range c.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	p.Argv = slices.Concat(c.Command, c.Args)
	p.Agent = testbed.StartProcess(e.t, "pod "+p.Name, p.Log, env, argv...)
	return nil
}

// restartContainer restarts p's exited container, as the kubelet does.
func (e *Env) restartContainer(p *LBSvcPod) {
	e.t.Helper()
	p.Restarts++
	e.t.Logf("e2e: pod %s/%s: container exited, restart %d:%s", p.Namespace, p.Name, p.Restarts, p.Agent.Log())
	if err := e.startContainer(p, filepath.Dir(p.Log)); err != nil {
		e.t.Fatalf("e2e: %v", err)
	}
}

// stopLBSvcPod stops p's container, removes its ports and deletes its
// network namespace (net1 leaves the segment) and its Pod object.
func (e *Env) stopLBSvcPod(p *LBSvcPod) {
	e.t.Helper()
	if p.Agent != nil {
		if err := p.Agent.Terminate(); err != nil {
			e.t.Errorf("e2e: %v", err)
		}
	}
	e.DeletePod(p.Namespace, p.Name)
	p.Pod.Netns.Delete(e.t)
	err := e.CS.CoreV1().Pods(p.Namespace).Delete(e.ctx, p.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("e2e: delete pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// podSuffix is the random tail of a pod name, as the ReplicaSet
// controller's (five characters of [a-z0-9]).
func podSuffix() string {
	const chars = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}
