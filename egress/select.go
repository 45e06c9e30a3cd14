package egress

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Pod is a pod an EgressIP serves: running, on the pod network, with IPs.
type Pod struct {
	Namespace, Name string
	// Node is where the pod runs.
	Node string
	IPs  []netip.Addr
}

// Key is "<namespace>/<name>".
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// PodFromK8s returns the pod's egress view, false for a pod egress does not
// handle: not running, host-network, or without a valid IP.
func PodFromK8s(p *corev1.Pod) (Pod, bool) { return NewPodInfo(p).Served() }

// Selector is an EgressIP's namespace and pod selectors, compiled once.
type Selector struct {
	namespace, pod labels.Selector
}

// NewSelector compiles spec's selectors. An empty namespaceSelector
// selects every namespace, an empty podSelector every pod of them.
func NewSelector(spec *egressv1.EgressIPSpec) (*Selector, error) {
	ns, err := metav1.LabelSelectorAsSelector(&spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	pod, err := metav1.LabelSelectorAsSelector(&spec.PodSelector)
	if err != nil {
		return nil, fmt.Errorf("podSelector: %w", err)
	}
	return &Selector{namespace: ns, pod: pod}, nil
}

// PodLabelSelector is the podSelector in the API server's syntax (a
// list's labelSelector): "" selects every pod.
func (s *Selector) PodLabelSelector() string { return s.pod.String() }

// SelectsNamespace reports whether the namespace's labels match.
func (s *Selector) SelectsNamespace(ns *corev1.Namespace) bool {
	return ns != nil && s.namespace.Matches(labels.Set(ns.Labels))
}

// Selects reports whether the pod (in namespace ns) is selected. It does
// not look at the pod's phase: see PodInfo.Served.
func (s *Selector) Selects(ns *corev1.Namespace, pod *PodInfo) bool {
	return pod != nil && s.SelectsNamespace(ns) && ns.Name == pod.Namespace && s.pod.Matches(pod.Labels)
}

// SelectPods returns the pods eip serves among pods, sorted by namespace
// and name. A malformed selector is an error; a selector that selects
// nothing is not.
func SelectPods(eip *egressv1.EgressIP, namespaces []*corev1.Namespace, pods []*PodInfo) ([]Pod, error) {
	sel, selected, err := selectNamespaces(eip, namespaces)
	if err != nil {
		return nil, err
	}
	return selectPods(sel, selected, slices.Values(pods)), nil
}

// selectNamespaces returns eip's selector and the namespaces it selects,
// by name.
func selectNamespaces(eip *egressv1.EgressIP, namespaces []*corev1.Namespace) (*Selector, map[string]*corev1.Namespace, error) {
	sel, err := NewSelector(&eip.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("egressip %s: %w", eip.Name, err)
	}
	selected := make(map[string]*corev1.Namespace)
	for _, ns := range namespaces {
		if sel.SelectsNamespace(ns) {
			selected[ns.Name] = ns
		}
	}
	return sel, selected, nil
}

// selectPods returns the candidates sel selects in the selected
// namespaces, sorted by namespace and name.
func selectPods(sel *Selector, selected map[string]*corev1.Namespace, candidates iter.Seq[*PodInfo]) []Pod {
	var out []Pod
	for p := range candidates {
		ns, ok := selected[p.Namespace]
		if !ok || !sel.Selects(ns, p) {
			continue
		}
		if ep, ok := p.Served(); ok {
			out = append(out, ep)
		}
	}
	slices.SortFunc(out, func(a, b Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Serve pairs every EgressIP with the pods it selects and its status items
// (by name, as Assign returns them), ready for Compute. An EgressIP whose
// selector is malformed gets an InvalidSelector event and is left out:
// left out of the state given to ovsdbnb.Client.Sync, its rows stay as
// they are, so a bad edit never tears down what is programmed. A
// selector that selects nothing is not an error: the EgressIP keeps its
// egress IPs and has no pod to reroute.
func Serve(eips []*egressv1.EgressIP, status map[string][]egressv1.EgressIPStatusItem, namespaces []*corev1.Namespace, pods []*PodInfo) ([]Served, []event.Event) {
	var served []Served
	var events []event.Event
	// Pods by namespace, once: an EgressIP looks only at the pods of
	// the namespaces it selects.
	byNS := map[string][]*PodInfo{}
	for _, p := range pods {
		if p != nil {
			byNS[p.Namespace] = append(byNS[p.Namespace], p)
		}
	}
	for _, eip := range eips {
		sel, selected, err := selectNamespaces(eip, namespaces)
		if err != nil {
			events = append(events, warning(eip, ReasonInvalidSelector, "%v", err))
			continue
		}
		ps := selectPods(sel, selected, func(yield func(*PodInfo) bool) {
			for name := range selected {
				for _, p := range byNS[name] {
					if !yield(p) {
						return
					}
				}
			}
		})
		served = append(served, Served{Name: eip.Name, Status: status[eip.Name], Pods: ps})
	}
	return served, events
}
