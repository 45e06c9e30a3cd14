package egress

import (
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PodInfo is what egress reads of a Pod, in compact form: its egress
// view (Pod), its labels and whether egress handles it. A leader keeps one
// for every pod of the cluster, so it is small: about a tenth of a
// trimmed corev1.Pod, with the label sets of pods labelled alike (a
// Deployment's replicas) shared.
type PodInfo struct {
	// Pod is the pod's identity, node and IPs.
	Pod
	// Labels are the pod's labels, shared with other PodInfos labelled
	// alike: read only.
	Labels labels.Labels
	// Handled is set when egress handles the pod: running, on the pod
	// network and not being deleted (it is served only with IPs too).
	Handled bool
}

// NewPodInfo returns p's PodInfo (nil for nil).
func NewPodInfo(p *corev1.Pod) *PodInfo {
	if p == nil {
		return nil
	}
	out := &PodInfo{Pod: Pod{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName},
		Labels:  internLabels(p.Labels),
		Handled: !p.Spec.HostNetwork && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip.IP); err == nil && !slices.Contains(out.IPs, a.Unmap()) {
			out.IPs = append(out.IPs, a.Unmap())
		}
	}
	out.IPs = slices.Clip(out.IPs)
	return out
}

// PodInfos are the PodInfos of pods, in their order (nil pods left out).
func PodInfos(pods []*corev1.Pod) []*PodInfo {
	out := make([]*PodInfo, 0, len(pods))
	for _, p := range pods {
		if p != nil {
			out = append(out, NewPodInfo(p))
		}
	}
	return out
}

// GetNamespace and GetName are the pod's namespace and name.
func (p *PodInfo) GetNamespace() string { return p.Namespace }
func (p *PodInfo) GetName() string      { return p.Name }

// Served returns the pod's egress view, false for a pod egress does not
// serve: not Handled, or without a valid IP.
func (p *PodInfo) Served() (Pod, bool) {
	if p == nil || !p.Handled || len(p.IPs) == 0 {
		return Pod{}, false
	}
	return p.Pod, true
}

// labelSet is an interned label set: the labels.Labels of every PodInfo
// labelled alike.
type labelSet struct{ set labels.Set }

func (l *labelSet) Has(k string) bool   { return l.set.Has(k) }
func (l *labelSet) Get(k string) string { return l.set.Get(k) }
func (l *labelSet) Lookup(k string) (string, bool) {
	v, ok := l.set[k]
	return v, ok
}
func (l *labelSet) String() string { return l.set.String() }

// labelSets interns label sets by their canonical form. An entry goes when
// no PodInfo holds its set any more (a weak pointer, removed by a cleanup).
var labelSets = struct {
	sync.Mutex
	m map[string]weak.Pointer[labelSet]
}{m: map[string]weak.Pointer[labelSet]{}}

// emptyLabels is every unlabelled pod's set.
var emptyLabels = &labelSet{set: labels.Set{}}

// internLabels returns the shared set equal to m.
func internLabels(m map[string]string) labels.Labels {
	if len(m) == 0 {
		return emptyLabels
	}
	key := canonical(m)
	labelSets.Lock()
	defer labelSets.Unlock()
	if wp, ok := labelSets.m[key]; ok {
		if l := wp.Value(); l != nil {
			return l
		}
	}
	l := &labelSet{set: maps.Clone(m)}
	labelSets.m[key] = weak.Make(l)
	runtime.AddCleanup(l, dropLabels, key)
	return l
}

// dropLabels removes the entry of a collected set, unless the key was
// interned again since.
func dropLabels(key string) {
	labelSets.Lock()
	defer labelSets.Unlock()
	if wp, ok := labelSets.m[key]; ok && wp.Value() == nil {
		delete(labelSets.m, key)
	}
}

// canonical is m's keys and values, sorted by key, each followed by a NUL
// (which neither may contain).
func canonical(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}
