package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/readiness"
)

// UninstallMarker is the ConfigMap, in the instances' namespace, whose
// existence asks every instance to remove what it wrote and stay idle:
// `ovnedge uninstall` (the chart's pre-delete hook) creates it, waits for
// the instances and deletes it.
const UninstallMarker = "ovnedge-uninstall"

// watchUninstall calls fire once, when the marker exists in namespace (at
// start too), until ctx ends.
func watchUninstall(ctx context.Context, cs kubernetes.Interface, namespace string, fire func()) {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", namespace,
		fields.OneTermEqualSelector("metadata.name", UninstallMarker))
	fired := false
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
			if !fired {
				fired = true
				fire()
			}
		}}})
	informer.RunWithContext(ctx)
}

// cleanup removes what this instance wrote: with a node, the node's flows,
// host egress IPs, EgressService SNATs and rules, L2 and BGP announcements
// (its writers given an empty state); on a leader candidate with an NB,
// every Northbound row ovnedge owns (a fresh leader's pass over an empty
// Snapshot: the rows of OVN-Kubernetes' topology are not ovnedge's and
// stay), the EgressServices' node labels and the leader Lease.
func (d *Dataplane) cleanup(ctx context.Context, cfg *Config, c *Clients, rec record.EventRecorder, m *Metrics, log *slog.Logger) error {
	var errs []error
	if d.node != nil {
		errs = append(errs, d.node.clean(ctx))
	}
	if cfg.LeaderElect && len(cfg.NBAddress) > 0 {
		p := ParamsFrom(cfg)
		// No EgressIP: its cluster-wide policies and address sets are
		// desired with no object at all.
		p.EnableEgressIP = false
		cw := newClusterWork(cfg, p, c, eventLog{rec: rec}, m, &hooks{}, log)
		errs = append(errs, cw.pass(ctx, desired.Snapshot{}))
		cw.close()
	}
	if cfg.LeaderElect && cfg.EnableEgressService {
		// The EgressServices' node labels (their status is the user's
		// objects').
		nodes, err := c.Typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			var s desired.Snapshot
			for i := range nodes.Items {
				s.Nodes = append(s.Nodes, &nodes.Items[i])
			}
			err = newStatus(c, log, nil).WriteEgressServices(ctx, s, desired.EgressServices{Hosts: map[string]string{}})
		}
		errs = append(errs, err)
	}
	if cfg.LeaderElect {
		l := DefaultLease("")
		err := c.Typed.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Lease %s/%s: %w", l.Namespace, l.Name, err))
		}
	}
	return errors.Join(errs...)
}

// clean gives every writer of the node an empty state: the flows ovnedge
// owns leave the bridge, the host's egress IPs and rules go, nothing is
// announced.
func (n *nodeWork) clean(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	ns := desired.NodeState{}
	for _, w := range n.writers {
		_, err := w.Write(ctx, n.current, &ns)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// waitUninstalled waits until every instance Pod in namespace (label
// app.kubernetes.io/name=ovnedge) that reports readiness.Condition reports
// readiness.ReasonUninstalled, and returns the Pods that did not by the deadline.
func waitUninstalled(ctx context.Context, cs kubernetes.Interface, namespace string, log *slog.Logger) ([]string, error) {
	for {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ovnedge"})
		var waiting []string
		if err == nil {
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == readiness.Condition && c.Reason != readiness.ReasonUninstalled {
						waiting = append(waiting, p.Name)
					}
				}
			}
			if len(waiting) == 0 {
				return nil, nil
			}
		}
		log.Info("waiting for the instances to remove what they wrote", "pods", waiting, "err", err)
		select {
		case <-ctx.Done():
			return waiting, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
