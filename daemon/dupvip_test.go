package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/kubewatch"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsdbnb"
	"github.com/ovnedge/ovnedge/testbed"
)

const dupExternalIP = `apiVersion: v1
kind: Service
metadata:
  name: aaa
  namespace: prod
spec:
  type: ClusterIP
  clusterIP: 10.96.0.12
  clusterIPs: [10.96.0.12]
  externalIPs: [172.18.0.201, 172.18.0.210]
  selector: {app: web}
  ports:
  - {name: https, protocol: TCP, port: 443, targetPort: 8443}
`

// A Service added to the manifests with an ExternalIP that a running
// Service serves gets its ClusterIP and its other ExternalIP programmed
// in a real NB, not the duplicate, which stays with the running Service
// although the newcomer's file and name sort first; the sync succeeds (no
// retry) and the newcomer gets a Warning event. Started anew on the same
// files, the daemon orders by file name, then position in the file.
func TestClusterDuplicateExternalIPManifests(t *testing.T) {
	ovn := startNB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := demoConfig(t, "--nb-address", ovn.NB)
	s, c := loadDemo(t, cfg, nil)
	rec := record.NewFakeRecorder(100)
	d := NewDataplane(cfg, c, rec, NewMetrics(), quiet)
	defer d.Close()
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatal(err)
	}
	w := kubewatch.NewWatcher(c.Typed, c.Dynamic, quiet, c.watchOptions(cfg)...)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}

	testbed.WriteFile(t, cfg.Manifests, "aa-dup.yaml", dupExternalIP)
	if err := c.Source.Reload(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if s, err = w.Snapshot(); err == nil && len(s.Services) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the added Service never reached the informers: %v", err)
		}
	}
	if err := d.Cluster(ctx, s); err != nil {
		t.Fatalf("a duplicate ExternalIP failed the sync (retried): %v", err)
	}
	lbVIPs := func(owner string) string {
		rows := ovn.Nbctl("--bare", "--columns=vips", "find", "Load_Balancer", "external_ids:\""+ovsdbnb.KeyOwner+"\"=\""+owner+"\"")
		t.Logf("%s: %s", owner, rows)
		return rows
	}
	if got := lbVIPs("prod/aaa"); !strings.Contains(got, "10.96.0.12:443") || !strings.Contains(got, "172.18.0.210:443") || strings.Contains(got, "172.18.0.201") {
		t.Errorf("newcomer's load balancer VIPs %q, want its ClusterIP and 172.18.0.210 only", got)
	}
	if got := lbVIPs("prod/api"); !strings.Contains(got, "172.18.0.201:443") {
		t.Errorf("running Service's load balancer VIPs %q lost 172.18.0.201", got)
	}
	if ev := drain(rec); !strings.Contains(ev, lbsvc.ReasonDuplicateExternalIP) || !strings.Contains(ev, "prod/api") {
		t.Errorf("events %q, want %s naming prod/api", ev, lbsvc.ReasonDuplicateExternalIP)
	}

	restarted, _ := loadDemo(t, cfg, map[string]string{"aa-dup.yaml": dupExternalIP})
	cs, err := desired.ComputeCluster(restarted, ParamsFrom(cfg), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for o, st := range cs.LB {
		for _, lb := range st.LoadBalancers {
			if o.Name == "prod/api" && strings.Contains(fmt.Sprint(lb.VIPs), "172.18.0.201") {
				t.Errorf("after a restart, aa-dup.yaml's Service comes first (file order) and holds 172.18.0.201; prod/api has %v", lb.VIPs)
			}
		}
	}
}
