package kubeovn

import (
	"cmp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/lbsvc/ipam"
)

// Kube-OVN's ConfigMap of the vpc-nat-gateway image, which its lb-svc
// Deployments run: key "image", and "nodeSelector" (lines "key: value").
const (
	ConfigMapNamespace = "kube-system"
	ConfigMapName      = "ovn-vpc-nat-config"
)

// Event reasons of Desired.
const (
	ReasonNoSubnet  = "AttachmentSubnetNotFound"
	ReasonBadSubnet = "InvalidAttachmentSubnet"
	ReasonNoImage   = "LBServiceImageUnknown"
)

// OptionsFromConfigMap returns opts completed from Kube-OVN's
// ovn-vpc-nat-config ConfigMap (nil: none): its image when opts has none,
// and its nodeSelector ("key: value" lines, as kube-ovn-controller reads
// them) when opts has none.
func OptionsFromConfigMap(opts Options, cm *corev1.ConfigMap) Options {
	if cm == nil {
		return opts
	}
	opts.Image = cmp.Or(opts.Image, strings.TrimSpace(cm.Data["image"]))
	if opts.NodeSelector == nil {
		for _, line := range strings.Split(cm.Data["nodeSelector"], "\n") {
			k, v, ok := strings.Cut(line, ":")
			if k, v = strings.TrimSpace(k), strings.TrimSpace(v); !ok || k == "" || strings.Contains(v, ":") {
				continue
			}
			if opts.NodeSelector == nil {
				opts.NodeSelector = map[string]string{}
			}
			opts.NodeSelector[k] = v
		}
	}
	return opts
}

// Input is what Desired reads: the cluster's Services, Kube-OVN Subnets
// and NetworkAttachmentDefinitions.
type Input struct {
	Services []*corev1.Service
	Subnets  []*Subnet
	NADs     []NAD
}

// Plan is the desired state of Kube-OVN's LoadBalancer Services.
type Plan struct {
	// Deployments are the lb-svc Deployments that must exist; any other
	// Deployment labelled LabelManagedBy=ManagedBy must not (see Changes).
	Deployments []*appsv1.Deployment
	// Keep are the lb-svc Deployments ("<namespace>/<name>") to leave as
	// they are: their Service is fine but no image is known.
	Keep []string
	// Ingress is the new status.loadBalancer.ingress of each Selected
	// Service whose addresses change, by "<namespace>/<name>" (empty:
	// the Service has none any more).
	Ingress map[string][]corev1.LoadBalancerIngress
	Events  []event.Event
}

// Desired returns the lb-svc Deployments and LoadBalancer addresses of
// the Selected Services. It is a pure function of its inputs.
//
// A Service's address comes from its provider's Subnet (ProviderSubnet)
// with Kube-OVN's IPAM semantics (package ipam): spec.loadBalancerIP when
// set and assignable (inside the Subnet, not its gateway nor another
// Service's), else the address its status already holds while still in
// the Subnet, else the lowest free address outside excludeIps; Services
// claim addresses oldest first. A Service gets its Deployment (see
// Deployment) once it has an address. Bad input is a Warning event on the
// Service, which then has no Deployment: a provider that is not
// <nad>.<namespace> or whose NetworkAttachmentDefinition is missing, no
// Subnet, a Subnet that does not parse, an exhausted Subnet, a static
// address that is not assignable. Without an image (opts.Image) every
// Service gets an event and its Deployment, if any, is kept as it is.
func Desired(in Input, opts Options) Plan {
	plan := Plan{Ingress: map[string][]corev1.LoadBalancerIngress{}}
	var selected []*corev1.Service
	for _, svc := range in.Services {
		if Selected(svc) && svc.DeletionTimestamp == nil {
			selected = append(selected, svc)
		}
	}
	slices.SortFunc(selected, lbsvc.OlderFirst)

	// Group the Services by Subnet; the others get no address.
	groups := map[string][]*corev1.Service{}
	subnets := map[string]*Subnet{}
	for _, svc := range selected {
		if _, ev := attachment(svc, in.NADs); ev != nil {
			plan.Events = append(plan.Events, *ev)
			plan.dropIngress(svc)
			continue
		}
		sub, err := ProviderSubnet(svc, in.Subnets)
		if err != nil {
			plan.Events = append(plan.Events, event.Warningf(event.Ref("v1", "Service", svc), ReasonNoSubnet,
				"no address for the LoadBalancer: %v; no %s%s Deployment", err, DeploymentPrefix, svc.Name))
			plan.dropIngress(svc)
			continue
		}
		subnets[sub.Name] = sub
		groups[sub.Name] = append(groups[sub.Name], svc)
	}

	addressed := map[*corev1.Service]*corev1.Service{}
	for name, svcs := range groups {
		pools, err := subnets[name].Pools()
		var alloc *ipam.Allocator
		if err == nil {
			alloc, err = ipam.NewAllocator(pools...)
		}
		if err != nil {
			for _, svc := range svcs {
				plan.Events = append(plan.Events, event.Warningf(event.Ref("v1", "Service", svc), ReasonBadSubnet,
					"Subnet %s cannot give addresses: %v; no %s%s Deployment", name, err, DeploymentPrefix, svc.Name))
			}
			continue // the Subnet may be fixed: the Services keep their status
		}
		plan.Events = append(plan.Events, alloc.Rebuild(svcs)...)
		for _, svc := range svcs {
			res := alloc.Allocate(svc)
			plan.Events = append(plan.Events, res.Events...)
			if !ipam.IngressEqual(res.Ingress, svc.Status.LoadBalancer.Ingress) &&
				(len(res.Ingress) > 0 || len(svc.Status.LoadBalancer.Ingress) > 0) {
				plan.Ingress[svc.Namespace+"/"+svc.Name] = res.Ingress
			}
			if len(res.Ingress) == 0 {
				continue
			}
			c := svc.DeepCopy()
			c.Status.LoadBalancer.Ingress = res.Ingress
			addressed[svc] = c
		}
	}

	for _, svc := range selected {
		c, ok := addressed[svc]
		if !ok {
			continue
		}
		if opts.Image == "" {
			plan.Events = append(plan.Events, event.Warningf(event.Ref("v1", "Service", svc), ReasonNoImage,
				"no image for %s%s: give --lb-svc-image or the key image of ConfigMap %s/%s; an existing Deployment stays as it is",
				DeploymentPrefix, svc.Name, ConfigMapNamespace, ConfigMapName))
			plan.Keep = append(plan.Keep, svc.Namespace+"/"+DeploymentPrefix+svc.Name)
			continue
		}
		dp, events := Deployment(c, in.NADs, opts)
		plan.Events = append(plan.Events, events...)
		if dp != nil {
			plan.Deployments = append(plan.Deployments, dp)
		}
	}
	return plan
}

// dropIngress clears the ingress of a Service that can have no address.
func (p *Plan) dropIngress(svc *corev1.Service) {
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		p.Ingress[svc.Namespace+"/"+svc.Name] = nil
	}
}

// Changes returns what makes the cluster's lb-svc Deployments (existing,
// those labelled LabelManagedBy=ManagedBy; others are ignored) those of
// the plan: the Deployments to create, to update (the plan's object with
// the existing one's resourceVersion, where AnnotationSpecHash differs)
// and to delete (managed ones neither wanted nor in Keep: orphans of
// deleted or deselected Services). It is a pure function.
func (p Plan) Changes(existing []*appsv1.Deployment) (create, update, del []*appsv1.Deployment) {
	have := map[string]*appsv1.Deployment{}
	for _, dp := range existing {
		if dp.Labels[LabelManagedBy] == ManagedBy {
			have[dp.Namespace+"/"+dp.Name] = dp
		}
	}
	want := map[string]bool{}
	for _, dp := range p.Deployments {
		k := dp.Namespace + "/" + dp.Name
		want[k] = true
		old, ok := have[k]
		switch {
		case !ok:
			create = append(create, dp)
		case old.Annotations[AnnotationSpecHash] != dp.Annotations[AnnotationSpecHash]:
			u := dp.DeepCopy()
			u.ResourceVersion = old.ResourceVersion
			update = append(update, u)
		}
	}
	for k, dp := range have {
		if !want[k] && !slices.Contains(p.Keep, k) {
			del = append(del, dp)
		}
	}
	slices.SortFunc(del, func(a, b *appsv1.Deployment) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return create, update, del
}
