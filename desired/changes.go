package desired

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovnedge/ovnedge/egress"
)

// Changes are the objects that changed since the last cluster reconcile,
// by kind and informer key ("<namespace>/<name>", or "<name>" for
// cluster-scoped kinds), each with its current object (nil: deleted).
// Other is set when a kind the incremental path does not follow changed
// (Subnets, NADs, lb-svc Deployments, the NAT ConfigMap, BGP peers): the
// reconcile is then a full one.
type Changes struct {
	Nodes          map[string]*corev1.Node
	Namespaces     map[string]*corev1.Namespace
	Pods           map[string]*egress.PodInfo
	Services       map[string]*corev1.Service
	EndpointSlices map[string]*discoveryv1.EndpointSlice
	EgressIPs      map[string]*unstructured.Unstructured
	EgressServices map[string]*unstructured.Unstructured
	Other          bool
	// Reassign is set when the EgressIPs' assignment may change without
	// an object changing: an egress node's reachability, a held egress
	// IP's hold running out (Env.Wake).
	Reassign bool
	// Since is when the informers delivered the first of these changes
	// (zero when not known): the pass logs how long they waited for it.
	Since time.Time
}

// Len is the number of changed objects.
func (c *Changes) Len() int {
	return len(c.Nodes) + len(c.Namespaces) + len(c.Pods) + len(c.Services) + len(c.EndpointSlices) + len(c.EgressIPs) + len(c.EgressServices)
}

// SnapshotChanges are the changes that take an empty cluster to s: every
// object of s, added.
func SnapshotChanges(s Snapshot) *Changes {
	c := &Changes{Nodes: keyed(s.Nodes), Namespaces: keyed(s.Namespaces), Pods: keyed(s.Pods), Services: keyed(s.Services),
		EndpointSlices: keyed(s.EndpointSlices), EgressIPs: keyed(s.EgressIPs), EgressServices: keyed(s.EgressServices)}
	return c
}

// keyed maps objects by their informer key.
func keyed[T any, P interface {
	*T
	GetNamespace() string
	GetName() string
}](objs []P) map[string]P {
	m := make(map[string]P, len(objs))
	for _, o := range objs {
		if o != nil {
			m[Key(o.GetNamespace(), o.GetName())] = o
		}
	}
	return m
}

// Key is the informers' key of an object (cache.MetaNamespaceKeyFunc).
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Merge records in c the changes of ch, which came after c's: each
// object as ch has it.
func (c *Changes) Merge(ch *Changes) {
	c.Nodes = mergeChanges(c.Nodes, ch.Nodes)
	c.Namespaces = mergeChanges(c.Namespaces, ch.Namespaces)
	c.Pods = mergeChanges(c.Pods, ch.Pods)
	c.Services = mergeChanges(c.Services, ch.Services)
	c.EndpointSlices = mergeChanges(c.EndpointSlices, ch.EndpointSlices)
	c.EgressIPs = mergeChanges(c.EgressIPs, ch.EgressIPs)
	c.EgressServices = mergeChanges(c.EgressServices, ch.EgressServices)
	c.Reassign = c.Reassign || ch.Reassign
}

// mergeChanges is dst with src's objects over its own (allocated when
// src is not empty).
func mergeChanges[T any](dst, src map[string]T) map[string]T {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]T, len(src))
	}
	maps.Copy(dst, src)
	return dst
}
