package kubeovn

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/agent"
)

// Annotations and names of Kube-OVN's LoadBalancer Services
// (pkg/controller/service_lb.go, pkg/util).
const (
	// AnnotationAttachmentProvider selects a Service: <nad>.<namespace>.
	AnnotationAttachmentProvider = "ovn.kubernetes.io/attachmentprovider"
	// AnnotationLogicalSwitch is Kube-OVN's default-network subnet
	// annotation, passed on to the pod when the Service has it.
	AnnotationLogicalSwitch = "ovn.kubernetes.io/logical_switch"
	// AnnotationNetworks is Multus' attachment annotation of the pod.
	AnnotationNetworks = "k8s.v1.cni.cncf.io/networks"
	// AnnotationResourceName on a NetworkAttachmentDefinition names a
	// device resource the pod must request.
	AnnotationResourceName = "k8s.v1.cni.cncf.io/resourceName"
	// LabelManagedBy, set to ManagedBy on every lb-svc Deployment
	// ovnedge creates (not on its pods), marks the Deployments ovnedge
	// updates and deletes; others are never touched.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "ovnedge"
	// AnnotationSpecHash on an lb-svc Deployment digests its labels,
	// owner and spec as ovnedge built them.
	AnnotationSpecHash = "ovnedge.io/lb-svc-spec-hash"
	// DeploymentPrefix prefixes the Service name: lb-svc-<service>.
	DeploymentPrefix = "lb-svc-"
	// ContainerName is the agent's container.
	ContainerName = "lb-svc"
	// PodInfoDir is where the pod's annotations are mounted (downward API).
	PodInfoDir = "/etc/podinfo"
)

// Event reasons.
const (
	ReasonUnknownProvider = "UnknownAttachmentProvider"
	ReasonNADNotFound     = "NetworkAttachmentDefinitionNotFound"
	ReasonNoClusterIP     = "LBServiceWithoutClusterIP"
	ReasonInvalidLBIP     = "InvalidLoadBalancerIP"
)

// LogicalSwitchAnnotation is the Service (and pod) annotation naming the
// subnet of the provider's attachment: <provider>.kubernetes.io/logical_switch.
func LogicalSwitchAnnotation(provider string) string {
	return provider + ".kubernetes.io/logical_switch"
}

// IPAddressAnnotation is the pod annotation requesting a static address
// of the attachment: <provider>.kubernetes.io/ip_address.
func IPAddressAnnotation(provider string) string { return provider + ".kubernetes.io/ip_address" }

// NAD identifies an existing NetworkAttachmentDefinition.
type NAD struct {
	Namespace, Name string
	// ResourceName is its k8s.v1.cni.cncf.io/resourceName annotation, if
	// any: the pod requests and is limited to one of it.
	ResourceName string
}

// Options shape the Deployment.
type Options struct {
	// Image is the image holding the ovnedge binary.
	Image string
	// Command runs the agent; DefaultCommand when empty.
	Command []string
	// NodeSelector places the pod (Kube-OVN reads it from the
	// ovn-vpc-nat-config ConfigMap).
	NodeSelector map[string]string
}

// DefaultCommand runs the agent subcommand of the ovnedge binary.
var DefaultCommand = []string{"ovnedge", "lbsvc-agent"}

// Selected reports whether svc is a Kube-OVN LB Service: type
// LoadBalancer with the attachment-provider annotation.
func Selected(svc *corev1.Service) bool {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	_, ok := svc.Annotations[AnnotationAttachmentProvider]
	return ok
}

// ParseProvider splits a provider "<nad>.<namespace>" at its first dot.
func ParseProvider(p string) (name, namespace string, err error) {
	name, namespace, ok := strings.Cut(p, ".")
	if !ok || name == "" || namespace == "" || strings.Contains(namespace, ".") {
		return "", "", fmt.Errorf("provider %q is not <network-attachment-definition>.<namespace>", p)
	}
	return name, namespace, nil
}

// PoolNames returns the ipam pools a Selected Service's address comes
// from: the subnet of its <provider>.kubernetes.io/logical_switch
// annotation, or none (every pool) without one.
func PoolNames(svc *corev1.Service) []string {
	if !Selected(svc) {
		return nil
	}
	if s := svc.Annotations[LogicalSwitchAnnotation(svc.Annotations[AnnotationAttachmentProvider])]; s != "" {
		return []string{s}
	}
	return nil
}

// Deployment returns the lb-svc-<service> Deployment of a Selected
// Service, or nil (delete any lb-svc Deployment of it) for any other
// Service and for a Selected one that cannot have one, which gets a
// Warning event: a provider that is not <nad>.<namespace>, a
// NetworkAttachmentDefinition missing from nads, no ClusterIP.
//
// The pod is attached with the NetworkAttachmentDefinition, addressed
// from the annotated subnet at spec.loadBalancerIP or else at the first
// status.loadBalancer.ingress IP (the address ipam allocated), and runs
// the agent with the Service's ClusterIP and ports; its address and
// gateway come from Kube-OVN's pod annotations, mounted under
// PodInfoDir. A change of the ports or ClusterIP changes the pod
// template: with the Recreate strategy the old pod and its rules go
// before the new one starts.
func Deployment(svc *corev1.Service, nads []NAD, opts Options) (*appsv1.Deployment, []event.Event) {
	if !Selected(svc) {
		return nil, nil
	}
	ref := event.Ref("v1", "Service", svc)
	provider := svc.Annotations[AnnotationAttachmentProvider]
	nad, ev := attachment(svc, nads)
	if ev != nil {
		return nil, []event.Event{*ev}
	}
	nadName, nadNS := nad.Name, nad.Namespace
	cluster, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return nil, []event.Event{event.Warningf(ref, ReasonNoClusterIP, "spec.clusterIP %q is not an address: nothing to forward to; no %s%s Deployment",
			svc.Spec.ClusterIP, DeploymentPrefix, svc.Name)}
	}
	var events []event.Event
	podAnn := map[string]string{AnnotationNetworks: nadNS + "/" + nadName}
	if s := svc.Annotations[LogicalSwitchAnnotation(provider)]; s != "" {
		podAnn[LogicalSwitchAnnotation(provider)] = s
	}
	if s, ok := svc.Annotations[AnnotationLogicalSwitch]; ok {
		podAnn[AnnotationLogicalSwitch] = s
	}
	if ip := lbIP(svc); ip != "" {
		if _, err := netip.ParseAddr(ip); err != nil {
			events = append(events, event.Warningf(ref, ReasonInvalidLBIP, "LoadBalancer IP %q is not an address; the subnet picks one", ip))
		} else {
			podAnn[IPAddressAnnotation(provider)] = ip
		}
	}
	cfg := agent.Config{Provider: provider, AnnotationsFile: PodInfoDir + "/annotations", ClusterIP: cluster}
	for _, p := range svc.Spec.Ports {
		if p.Port > 0 && p.Port <= 65535 {
			cfg.Ports = append(cfg.Ports, agent.Port{Protocol: strings.ToLower(string(cmp.Or(p.Protocol, corev1.ProtocolTCP))), Port: uint16(p.Port)})
		}
	}
	name := DeploymentPrefix + svc.Name
	labels := map[string]string{"app": NormalizeLabelValue(name), "namespace": svc.Namespace, "service": svc.Name}
	// The Deployment alone also carries the managed-by label, by which
	// ovnedge finds its Deployments (and only those) again: the
	// selector and the pod's labels stay Kube-OVN's.
	ownLabels := maps.Clone(labels)
	ownLabels[LabelManagedBy] = ManagedBy
	res := corev1.ResourceRequirements{}
	if r := nad.ResourceName; r != "" {
		one := corev1.ResourceList{corev1.ResourceName(r): resource.MustParse("1")}
		res.Limits, res.Requests = one, one.DeepCopy()
	}
	command := slices.Clone(opts.Command)
	if len(command) == 0 {
		command = slices.Clone(DefaultCommand)
	}
	dp := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: svc.Namespace, Labels: ownLabels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: podAnn},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: ContainerName, Image: opts.Image,
						Command:         command,
						Args:            cfg.Args(),
						ImagePullPolicy: corev1.PullIfNotPresent,
						// Privileged, as Kube-OVN's: routes, rules, nftables and
						// the ip_forward sysctl (/proc/sys is read-only otherwise);
						// as root, since ovnedge's image runs as user 65532.
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To(int64(0))},
						Resources:       res,
						VolumeMounts:    []corev1.VolumeMount{{Name: "podinfo", MountPath: PodInfoDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
						Items: []corev1.DownwardAPIVolumeFile{{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}}}}}},
					NodeSelector:                  opts.NodeSelector,
					TerminationGracePeriodSeconds: ptr.To(int64(0)),
				},
			},
		},
	}
	dp.Annotations = map[string]string{AnnotationSpecHash: specHash(dp)}
	return dp, events
}

// attachment returns the existing NetworkAttachmentDefinition of a
// Selected Service's provider, or the Warning event saying why there is
// none.
func attachment(svc *corev1.Service, nads []NAD) (NAD, *event.Event) {
	ref := event.Ref("v1", "Service", svc)
	provider := svc.Annotations[AnnotationAttachmentProvider]
	nadName, nadNS, err := ParseProvider(provider)
	if err != nil {
		ev := event.Warningf(ref, ReasonUnknownProvider, "annotation %s: %v; no %s%s Deployment",
			AnnotationAttachmentProvider, err, DeploymentPrefix, svc.Name)
		return NAD{}, &ev
	}
	i := slices.IndexFunc(nads, func(n NAD) bool { return n.Namespace == nadNS && n.Name == nadName })
	if i < 0 {
		ev := event.Warningf(ref, ReasonNADNotFound, "NetworkAttachmentDefinition %s/%s of provider %q does not exist; no %s%s Deployment",
			nadNS, nadName, provider, DeploymentPrefix, svc.Name)
		return NAD{}, &ev
	}
	return nads[i], nil
}

// specHash digests what Deployment decides of a Deployment: its labels,
// owner and spec. Stored in AnnotationSpecHash, it tells whether a
// Deployment in the cluster is still the one wanted without comparing
// objects the API server has defaulted.
func specHash(dp *appsv1.Deployment) string {
	b, err := json.Marshal(struct {
		Labels map[string]string
		Owners []metav1.OwnerReference
		Spec   appsv1.DeploymentSpec
	}{dp.Labels, dp.OwnerReferences, dp.Spec})
	if err != nil { // plain structs and maps: cannot happen
		panic(fmt.Sprintf("lb-svc deployment hash: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// NormalizeLabelValue returns value when it fits a label value (63
// characters), else, as Kube-OVN's util.NormalizeLabelValue does, its
// first 54 characters, a dash and the first 8 hex digits of the SHA-256 of
// the whole value: lb-svc-<service> of a 63-character Service name is 70
// characters, which the API server refuses as the pod's app label.
func NormalizeLabelValue(value string) string {
	if len(value) <= validation.LabelValueMaxLength {
		return value
	}
	sum := sha256.Sum256([]byte(value))
	const hashLen = 8
	return value[:validation.LabelValueMaxLength-hashLen-1] + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// lbIP is the address the pod asks for: spec.loadBalancerIP, else the
// first ingress IP.
func lbIP(svc *corev1.Service) string {
	if svc.Spec.LoadBalancerIP != "" {
		return svc.Spec.LoadBalancerIP
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
	}
	return ""
}
