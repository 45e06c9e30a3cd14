package egress

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
)

// ReasonInvalidObject is the Warning event of an EgressIP that does not
// parse: it is skipped, its rows stay as they are.
const ReasonInvalidObject = "InvalidObject"

// Selection is Serve's pod selection kept up to date object by object:
// which pods each EgressIP serves, in a cluster whose namespaces, pods
// and EgressIPs change one at a time. Each change costs what it reaches:
// a namespace is matched against every EgressIP's namespace selector, a
// pod against the EgressIPs selecting its namespace and those serving it,
// an EgressIP against every namespace and its namespaces' pods. Every
// change of the pods an EgressIP serves is reported (PodChange), so a
// caller keeping rows of them computes only those again. The objects are
// kept as given (read, never modified). It is not safe for concurrent use.
type Selection struct {
	namespaces map[string]*corev1.Namespace
	podsByNS   map[string]map[string]*PodInfo // by namespace, then key
	eips       map[string]*Selected
	nsEIPs     map[string]map[string]bool // namespace -> EgressIPs selecting it
	podEIPs    map[string]map[string]bool // pod -> EgressIPs serving it
	names      []string                   // sorted; nil after an EgressIP came or went
}

// Selected is one EgressIP of a Selection: its object, parse, the
// namespaces it selects and the pods it serves.
type Selected struct {
	Object *unstructured.Unstructured
	// EgressIP is the parse, nil when the object does not parse.
	EgressIP *egressv1.EgressIP
	// Events are its parse or selector errors.
	Events []event.Event
	// Pods are the pods it serves, by informer key.
	Pods map[string]Pod
	// Valid is set when it parses with a valid selector: it has rows.
	Valid bool
	sel   *Selector       // nil: not Valid
	nss   map[string]bool // the namespaces selected
}

// PodChange is a change of the pods EgressIP serves: pod Key stopped
// being served (Had, as Old) and/or is served now (Has, as New).
type PodChange struct {
	EgressIP, Key string
	Old, New      Pod
	Had, Has      bool
}

// NewSelection returns an empty Selection.
func NewSelection() *Selection {
	return &Selection{namespaces: map[string]*corev1.Namespace{},
		podsByNS: map[string]map[string]*PodInfo{}, eips: map[string]*Selected{},
		nsEIPs: map[string]map[string]bool{}, podEIPs: map[string]map[string]bool{}}
}

// Get is EgressIP name, nil when the Selection has none.
func (s *Selection) Get(name string) *Selected { return s.eips[name] }

// Names are the EgressIPs' names, sorted.
func (s *Selection) Names() []string {
	if s.names == nil {
		s.names = slices.Sorted(maps.Keys(s.eips))
	}
	return s.names
}

// ServedAs is pod k as an EgressIP serving it holds it (the zero Pod when
// none serves it).
func (s *Selection) ServedAs(k string) Pod {
	for name := range s.podEIPs[k] {
		if p, ok := s.eips[name].Pods[k]; ok {
			return p
		}
	}
	return Pod{}
}

// SetNamespace records namespace k as ns (nil: deleted): the EgressIPs
// whose selection of it changes serve its pods, or stop serving them.
func (s *Selection) SetNamespace(k string, ns *corev1.Namespace, changed func(PodChange)) {
	if s.namespaces[k] == ns {
		return
	}
	if ns == nil {
		delete(s.namespaces, k)
	} else {
		s.namespaces[k] = ns
	}
	for name, e := range s.eips {
		if e.sel == nil {
			continue
		}
		sel := ns != nil && e.sel.SelectsNamespace(ns)
		if sel == e.nss[k] {
			continue
		}
		s.selectNamespace(name, e, k, sel, changed)
	}
}

// selectNamespace makes EgressIP e select namespace ns or not, and serve
// its pods accordingly.
func (s *Selection) selectNamespace(name string, e *Selected, ns string, sel bool, changed func(PodChange)) {
	if sel {
		e.nss[ns] = true
		addTo(s.nsEIPs, ns, name)
	} else {
		delete(e.nss, ns)
		removeFrom(s.nsEIPs, ns, name)
	}
	for pk, pod := range s.podsByNS[ns] {
		s.servePod(name, e, pk, pod, changed)
	}
}

// servePod makes e serve pod (key pk) when its selectors select it and
// egress handles it, or not, and reports a change.
func (s *Selection) servePod(name string, e *Selected, pk string, pod *PodInfo, changed func(PodChange)) {
	var want Pod
	ok := false
	if pod != nil && e.sel != nil && e.nss[pod.Namespace] {
		if ns := s.namespaces[pod.Namespace]; ns != nil && e.sel.Selects(ns, pod) {
			want, ok = pod.Served()
		}
	}
	have, had := e.Pods[pk]
	if ok == had && (!ok || reflect.DeepEqual(have, want)) {
		return
	}
	if had {
		delete(e.Pods, pk)
		removeFrom(s.podEIPs, pk, name)
	}
	if ok {
		e.Pods[pk] = want
		addTo(s.podEIPs, pk, name)
	}
	changed(PodChange{EgressIP: name, Key: pk, Old: have, New: want, Had: had, Has: ok})
}

// SetPod records pod k (its informer key, "<namespace>/<name>") as pod
// (nil: deleted): the EgressIPs of its namespace, and those serving it,
// select it again.
func (s *Selection) SetPod(k string, pod *PodInfo, changed func(PodChange)) {
	ns, _, _ := strings.Cut(k, "/") // the key's namespace: the pod's, before and after
	old := s.podsByNS[ns][k]
	if old == pod {
		return
	}
	if old != nil {
		delete(s.podsByNS[ns], k)
		if len(s.podsByNS[ns]) == 0 {
			delete(s.podsByNS, ns)
		}
	}
	if pod != nil {
		ns = pod.Namespace
		if s.podsByNS[ns] == nil {
			s.podsByNS[ns] = map[string]*PodInfo{}
		}
		s.podsByNS[ns][k] = pod
	}
	for name := range s.podEIPs[k] {
		s.servePod(name, s.eips[name], k, pod, changed)
	}
	for name := range s.nsEIPs[ns] {
		s.servePod(name, s.eips[name], k, pod, changed)
	}
}

// SetResult says what SetEgressIP did.
type SetResult int

const (
	// SetUnchanged: the object was already there.
	SetUnchanged SetResult = iota
	// SetSpecKept: a new object with the spec as before (a status
	// written): the selection stands.
	SetSpecKept
	// SetAdded: the EgressIP is new; its namespaces and pods were
	// selected.
	SetAdded
	// SetReplaced: the EgressIP was there before and was deleted, or its
	// spec changed (or broke, or got well): its old pods were let go, and
	// the new ones selected.
	SetReplaced
)

// SetEgressIP records EgressIP k as u (nil: deleted): parsed, its
// selector compiled and its namespaces and pods selected again, unless
// its spec is as before (a status written, the leader's own among them:
// then the selection stands; after a node going NotReady at 150,000 pods,
// the pass of the 5 statuses shown back selected 150 pods each again,
// 1 ms).
func (s *Selection) SetEgressIP(k string, u *unstructured.Unstructured, changed func(PodChange)) SetResult {
	old := s.eips[k]
	if old != nil && old.Object == u {
		return SetUnchanged
	}
	var eip *egressv1.EgressIP
	var parseErr error
	if u != nil {
		eip, parseErr = egressv1.FromUnstructured(u)
	}
	if old != nil && old.Valid && parseErr == nil && eip != nil && equality.Semantic.DeepEqual(eip.Spec, old.EgressIP.Spec) {
		old.Object, old.EgressIP = u, eip
		return SetSpecKept
	}
	if old == nil || u == nil {
		s.names = nil
	}
	res := SetAdded
	if old != nil { // out with the old: its pods and namespaces
		for pk := range old.Pods {
			s.servePod(k, old, pk, nil, changed)
		}
		for ns := range old.nss {
			removeFrom(s.nsEIPs, ns, k)
		}
		res = SetReplaced
	}
	if u == nil {
		delete(s.eips, k)
		return res
	}
	s.eips[k] = s.newSelected(k, u, eip, parseErr, changed)
	return res
}

// newSelected is EgressIP k's entry, its namespaces and pods selected.
func (s *Selection) newSelected(k string, u *unstructured.Unstructured, eip *egressv1.EgressIP, parseErr error, changed func(PodChange)) *Selected {
	e := &Selected{Object: u, nss: map[string]bool{}, Pods: map[string]Pod{}}
	if parseErr != nil {
		e.Events = []event.Event{event.Warningf(event.Ref(u.GetAPIVersion(), u.GetKind(), u),
			ReasonInvalidObject, "EgressIP skipped, its rows stay as they are: %v", parseErr)}
		return e
	}
	e.EgressIP = eip
	sel, err := NewSelector(&eip.Spec)
	if err != nil {
		e.Events = []event.Event{event.Warningf(event.Ref(egressv1.SchemeGroupVersion.String(), egressv1.Kind, eip),
			ReasonInvalidSelector, "%v", fmt.Errorf("egressip %s: %w", eip.Name, err))}
		return e
	}
	e.sel, e.Valid = sel, true
	s.eips[k] = e // its pods are reported as its
	for name, ns := range s.namespaces {
		if sel.SelectsNamespace(ns) {
			s.selectNamespace(k, e, name, true, changed)
		}
	}
	return e
}

func addTo(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

func removeFrom(m map[string]map[string]bool, k, v string) {
	delete(m[k], v)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}
