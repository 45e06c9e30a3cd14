package kubestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/ovnedge/ovnedge/desired"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/lbsvc/kubeovn"
	"github.com/ovnedge/ovnedge/ovnknode"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Writer writes what the dataplane's owners report back to the API
// server: the EgressIPs' status, the LoadBalancer Services' ingress, the
// lb-svc Deployments of Kube-OVN's LoadBalancer Services, a node's
// report of its egress IPs on host interfaces, and the EgressServices'
// hosts and node labels. With FromManifests they go to the in-memory API
// of a manifests directory (and the log).
type Writer struct {
	// Typed and Dynamic are the clients; FromManifests says they serve
	// a manifests directory.
	Typed         kubernetes.Interface
	Dynamic       dynamic.Interface
	FromManifests bool
	Log           *slog.Logger
	// Failovers, when not nil, counts the egress IPs a status write moves
	// from one node to another.
	Failovers func(n int)
	// checked are the EgressIPs found holding their status.
	checked map[string]checkedStatus
	// written are the EgressIPs whose status this leader wrote while its
	// informer still shows the object written over (by name). The
	// assignment takes an EgressIP's current status as the one to keep,
	// so it reads the written object instead: from the stale one, a node
	// back in service just after its egress IPs moved away would get
	// them back (e2e TestFastFailover/UplinkDown).
	written map[string]writtenStatus
}

// WriteEgressStatus writes the EgressIPs' new status items. In manifests
// mode they are logged (and kept in the in-memory API, so the assignment
// sticks). A conflict is returned: the reconcile is retried on the fresh
// object.
func (ks *Writer) WriteEgressStatus(ctx context.Context, s desired.Snapshot, status map[string][]egressv1.EgressIPStatusItem) error {
	var errs []error
	seen := make(map[string]checkedStatus, len(ks.checked))
	defer func() { ks.checked = seen }()
	var updates []*unstructured.Unstructured
	bases := map[string]*unstructured.Unstructured{} // the informer's objects the updates write over
	for _, u := range s.EgressIPs {
		name := u.GetName() // a lookup in the object's maps: once
		items, ok := status[name]
		if !ok {
			continue
		}
		// An object already found holding these items is not read
		// again (a reconcile costs no EgressIP's parse but those that
		// changed).
		if c, ok := ks.checked[name]; ok && c.obj == u && slices.Equal(c.items, items) {
			seen[name] = c
			continue
		}
		old, err := egressv1.FromUnstructured(u)
		if err != nil {
			continue // recorded as an event by desired.ComputeCluster
		}
		if slices.Equal(old.Status.Items, items) {
			seen[name] = checkedStatus{obj: u, items: items}
			continue
		}
		if ks.Failovers != nil {
			ks.Failovers(failovers(old.Status.Items, items))
		}
		n := old.DeepCopy()
		n.Status.Items = items
		obj, err := egressv1.ToUnstructured(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("status of EgressIP %s: %w", n.Name, err))
			continue
		}
		ks.Log.Info("EgressIP status", "egressip", n.Name, "items", fmt.Sprint(items), "manifests", ks.FromManifests)
		updates = append(updates, obj)
		over := u
		if w, ok := ks.written[name]; ok && w.obj == u {
			over = w.over // a second write before the informer showed the first
		}
		bases[name] = over
	}
	// The CRD has no status subresource (as in OVN-Kubernetes): the
	// status is written with the object. The writes go statusWriters at
	// a time (within the client's --kube-api-qps): one after the other, a
	// leader starting on a thousand unassigned EgressIPs spent 14 s
	// writing them before its first NB row.
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan *unstructured.Unstructured)
	for range min(statusWriters, len(updates)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range next {
				res, err := ks.Dynamic.Resource(egressv1.Resource).Update(ctx, obj, metav1.UpdateOptions{})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("status of EgressIP %s: %w", obj.GetName(), err))
				} else if res != nil {
					if ks.written == nil {
						ks.written = map[string]writtenStatus{}
					}
					ks.written[obj.GetName()] = writtenStatus{over: bases[obj.GetName()], obj: res}
				}
				mu.Unlock()
			}
		}()
	}
	for _, obj := range updates {
		next <- obj
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// writtenStatus is an EgressIP status write the informer does not show
// yet: the informer's object written over (the store keeps handing out
// that very object until the echo or another change replaces it) and the
// server's answer; injected once the incremental index has been given
// the answer.
type writtenStatus struct {
	over     *unstructured.Unstructured
	obj      *unstructured.Unstructured
	injected bool
}

// OverlayWritten returns objs with every object the leader wrote over
// replaced by what it wrote, and forgets the writes the informer shows.
//
// shown are the informer's objects of the writes it forgot: the
// incremental path gives them to its index, which may not have been given
// them (the informer can show a write between the cluster loop's taking
// of the changes and its listing of the objects: the change is then in
// the next pass's changes, and without shown this pass would read the
// EgressIP as it was before the write, with no status).
func (ks *Writer) OverlayWritten(objs []*unstructured.Unstructured) (out []*unstructured.Unstructured, shown map[string]*unstructured.Unstructured) {
	if len(ks.written) == 0 {
		return objs, nil
	}
	out = slices.Clone(objs)
	over := map[string]bool{}
	current := map[string]*unstructured.Unstructured{}
	for i, u := range out {
		w, ok := ks.written[u.GetName()]
		switch {
		case ok && u == w.over:
			out[i] = w.obj
			over[u.GetName()] = true
		case ok:
			current[u.GetName()] = u
		}
	}
	for name := range ks.written {
		if !over[name] {
			delete(ks.written, name) // the write is in, or a later change, or a deletion
			if u := current[name]; u != nil {
				if shown == nil {
					shown = map[string]*unstructured.Unstructured{}
				}
				shown[desired.Key("", name)] = u
			}
		}
	}
	return out, shown
}

// InjectWritten puts into ch, for the incremental index, each written
// object it has not been given, the written object in place of every
// changed object it wrote over, and the objects of shown (OverlayWritten's
// forgotten writes) that ch lacks. It runs after OverlayWritten.
func (ks *Writer) InjectWritten(ch *desired.Changes, shown map[string]*unstructured.Unstructured) {
	set := func(k string, u *unstructured.Unstructured) {
		if ch.EgressIPs == nil {
			ch.EgressIPs = map[string]*unstructured.Unstructured{}
		}
		ch.EgressIPs[k] = u
	}
	for k, u := range shown {
		if _, ok := ch.EgressIPs[k]; !ok {
			set(k, u)
		}
	}
	for name, w := range ks.written {
		k := desired.Key("", name)
		u, changed := ch.EgressIPs[k]
		switch {
		case changed && u != w.over:
			continue // deleted or changed since: the informer's object rules
		case changed || !w.injected:
			set(k, w.obj)
			w.injected = true
			ks.written[name] = w
		}
	}
}

// statusWriters is how many EgressIP status writes are in flight at once.
const statusWriters = 8

// checkedStatus is an EgressIP object found holding the status items
// the leader wants.
type checkedStatus struct {
	obj   *unstructured.Unstructured
	items []egressv1.EgressIPStatusItem
}

// failovers counts the egress IPs of old that now have another node.
func failovers(old, items []egressv1.EgressIPStatusItem) int {
	n := 0
	for _, o := range old {
		for _, i := range items {
			if i.EgressIP == o.EgressIP && i.Node != o.Node {
				n++
			}
		}
	}
	return n
}

// WriteIngress writes the LoadBalancer Services' ingress addresses.
func (ks *Writer) WriteIngress(ctx context.Context, s desired.Snapshot, ingress map[string][]corev1.LoadBalancerIngress) error {
	if len(ingress) == 0 {
		return nil // most passes: no Service's ingress changed
	}
	var errs []error
	for _, svc := range s.Services {
		ing, ok := ingress[svc.Namespace+"/"+svc.Name]
		if !ok {
			continue
		}
		c := svc.DeepCopy()
		c.Status.LoadBalancer.Ingress = ing
		ks.Log.Info("Service load balancer ingress", "service", svc.Namespace+"/"+svc.Name, "ingress", fmt.Sprint(ing),
			"manifests", ks.FromManifests)
		if _, err := ks.Typed.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("status of Service %s/%s: %w", svc.Namespace, svc.Name, err))
		}
	}
	return errors.Join(errs...)
}

// ReasonLBSvcNotOwned is the Warning event of a Service whose
// lb-svc-<service> Deployment exists but is not ovnedge's (Kube-OVN's own,
// say): it is left alone.
const ReasonLBSvcNotOwned = "LBServiceDeploymentNotOwned"

// SyncLBSvc makes the cluster's lb-svc Deployments those of plan:
// creates, updates (on the resourceVersion the informer saw: a conflict
// is retried) and deletes of orphans (on their UID). A
// Deployment of the name that ovnedge does not manage is an event.
func (ks *Writer) SyncLBSvc(ctx context.Context, plan *kubeovn.Plan, existing []*appsv1.Deployment) ([]event.Event, error) {
	create, update, del := plan.Changes(existing)
	api := ks.Typed.AppsV1()
	var events []event.Event
	var errs []error
	for _, dp := range create {
		_, err := api.Deployments(dp.Namespace).Create(ctx, dp, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := api.Deployments(dp.Namespace).Get(ctx, dp.Name, metav1.GetOptions{})
			if gerr == nil && cur.Labels[kubeovn.LabelManagedBy] == kubeovn.ManagedBy {
				continue // created by an earlier pass the informer has not shown yet
			}
			if gerr == nil {
				owner := dp.OwnerReferences[0]
				events = append(events, event.Warningf(corev1.ObjectReference{APIVersion: "v1", Kind: "Service",
					Namespace: dp.Namespace, Name: owner.Name, UID: owner.UID}, ReasonLBSvcNotOwned,
					"Deployment %s/%s exists without the label %s=%s: it is not ovnedge's and is left alone",
					dp.Namespace, dp.Name, kubeovn.LabelManagedBy, kubeovn.ManagedBy))
				continue
			}
			err = gerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("create Deployment %s/%s: %w", dp.Namespace, dp.Name, err))
			continue
		}
		ks.Log.Info("lb-svc Deployment created", "deployment", dp.Namespace+"/"+dp.Name, "manifests", ks.FromManifests)
	}
	for _, dp := range update {
		if _, err := api.Deployments(dp.Namespace).Update(ctx, dp, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("update Deployment %s/%s: %w", dp.Namespace, dp.Name, err))
			continue
		}
		ks.Log.Info("lb-svc Deployment updated", "deployment", dp.Namespace+"/"+dp.Name, "manifests", ks.FromManifests)
	}
	for _, dp := range del {
		err := api.Deployments(dp.Namespace).Delete(ctx, dp.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &dp.UID}, PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Deployment %s/%s: %w", dp.Namespace, dp.Name, err))
			continue
		}
		ks.Log.Info("lb-svc Deployment deleted: its Service is gone or no longer an lb-svc one", "deployment", dp.Namespace+"/"+dp.Name,
			"manifests", ks.FromManifests)
	}
	return events, errors.Join(errs...)
}

// ReportHost writes the node's report to its Node object (annotation
// ovnknode.AnnotationHostEgress) when it differs from what the object
// holds; an empty report removes the annotation. In manifests mode
// nothing is written.
func (ks *Writer) ReportHost(ctx context.Context, node string, s desired.Snapshot, r ovnknode.HostReport) error {
	if ks.FromManifests {
		return nil
	}
	var cur *corev1.Node
	for _, n := range s.Nodes {
		if n.Name == node {
			cur = n
		}
	}
	if cur == nil {
		return nil
	}
	old, had := cur.Annotations[ovnknode.AnnotationHostEgress]
	var value any
	if !r.Empty() {
		value = r.String()
	}
	if (value == nil && !had) || (had && value == old) {
		return nil
	}
	patch := AnnotationPatch(ovnknode.AnnotationHostEgress, value)
	if _, err := ks.Typed.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("report host egress IPs on node %s: %w", node, err)
	}
	ks.Log.Info("host egress IPs reported", "node", node, "report", value)
	return nil
}

// AnnotationPatch is the JSON merge patch setting annotation key to
// value (a string), or removing it (nil).
func AnnotationPatch(key string, value any) []byte {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	return patch
}
