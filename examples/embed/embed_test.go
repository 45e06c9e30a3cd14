package embed_test

import (
	"flag"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/examples/embed"
	"github.com/ovnedge/ovnedge/lbsvc"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

// The CNI's own -update flag: flowtest registers none, so this does not
// panic with "flag redefined: update".
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func web() lbsvc.Service {
	return lbsvc.Service{
		Namespace: "default", Name: "web", Type: "LoadBalancer",
		ClusterIPs:      []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("172.18.0.50")},
		Ports:           []lbsvc.Port{{Name: "http", Port: 80, TargetPort: 8080, NodePort: 30080}},
		Endpoints:       []lbsvc.Endpoint{{Addr: netip.MustParseAddr("10.244.1.3"), Node: "node1"}},
	}
}

func TestBuild(t *testing.T) {
	plan, err := embed.Build([]string{"172.18.0.33", "172.18.0.44", "not-an-ip"}, web())
	if err != nil {
		t.Fatal(err)
	}
	if plan.EgressNodes["172.18.0.33"] != "node1" || plan.EgressNodes["172.18.0.44"] != "node2" {
		t.Errorf("egress nodes %v, want one IP on each hand-built node", plan.EgressNodes)
	}
	if len(plan.Events) != 1 || plan.Events[0].Reason != "InvalidEgressIP" || plan.Events[0].Object.Name != "prod" {
		t.Errorf("events %v, want one InvalidEgressIP on prod", plan.Events)
	}
	opts := flowtest.Options{Update: *update || flowtest.Updating()}
	opts.Golden(t, filepath.Join("testdata", "nb.golden"), plan.NB)
	opts.Golden(t, filepath.Join("testdata", "flows.golden"), plan.Flows)
}

// The module's public API pulls in no host I/O package and nothing
// internal; a golden comparison alone pulls in nothing but the standard
// library.
func TestDependencies(t *testing.T) {
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, d := range deps(".") {
		if strings.Contains(d, "/internal/") && strings.HasPrefix(d, "github.com/ovnedge/") {
			t.Errorf("embed imports %s", d)
		}
	}
	for _, d := range deps("github.com/ovnedge/ovnedge/ovsflow/flowtest") {
		if strings.Contains(strings.Split(d, "/")[0], ".") && !strings.HasPrefix(d, "github.com/ovnedge/ovnedge/ovsflow/flowtest") {
			t.Errorf("flowtest imports %s", d)
		}
	}
}
