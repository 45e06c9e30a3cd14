package kubestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovnedge/ovnedge/desired"
	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"github.com/ovnedge/ovnedge/egress/egresssvc"
)

// WriteEgressServices writes the EgressServices' status.host and the
// nodes' egress-service labels where they differ from the objects of s:
// labels a node no longer carries go first, the host then, the new
// node's label last (a label names the node that serves).
func (ks *Writer) WriteEgressServices(ctx context.Context, s desired.Snapshot, st desired.EgressServices) error {
	if st.Hosts == nil || ks.FromManifests {
		return nil
	}
	return errors.Join(ks.writeLabels(ctx, s, st.Labels, false), ks.writeHosts(ctx, s.EgressServices, st.Hosts),
		ks.writeLabels(ctx, s, st.Labels, true))
}

// writeHosts patches the status.host of the EgressServices whose host
// changed.
func (ks *Writer) writeHosts(ctx context.Context, objs []*unstructured.Unstructured, hosts map[string]string) error {
	var errs []error
	for _, u := range objs {
		host, ok := hosts[desired.Key(u.GetNamespace(), u.GetName())]
		cur, found, _ := unstructured.NestedString(u.Object, "status", "host")
		if !ok || (found && cur == host) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"host": host}})
		_, err := ks.Dynamic.Resource(egressv1.ServiceResource).Namespace(u.GetNamespace()).
			Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			errs = append(errs, fmt.Errorf("status of EgressService %s/%s: %w", u.GetNamespace(), u.GetName(), err))
			continue
		}
		ks.Log.Info("EgressService host", "egressservice", u.GetNamespace()+"/"+u.GetName(), "host", host, "was", cur)
	}
	return errors.Join(errs...)
}

// writeLabels removes (add false) or adds the egress-service labels of
// the nodes whose labels differ from want.
func (ks *Writer) writeLabels(ctx context.Context, s desired.Snapshot, want map[string][]string, add bool) error {
	var errs []error
	for _, n := range s.Nodes {
		labels := labelChanges(n.Labels, want[n.Name], add)
		if len(labels) == 0 {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if _, err := ks.Typed.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("egress-service labels of node %s: %w", n.Name, err))
			continue
		}
		ks.Log.Info("egress-service labels", "node", n.Name, "labels", labels)
	}
	return errors.Join(errs...)
}

// labelChanges are the labels of a merge patch adding the wanted
// egress-service labels a node lacks (add), or removing those it carries
// and should not.
func labelChanges(have map[string]string, want []string, add bool) map[string]any {
	out := map[string]any{}
	if add {
		for _, k := range want {
			if _, ok := have[k]; !ok {
				out[k] = ""
			}
		}
		return out
	}
	for k := range have {
		if strings.HasPrefix(k, egresssvc.LabelPrefix+"/") && !slices.Contains(want, k) {
			out[k] = nil
		}
	}
	return out
}
