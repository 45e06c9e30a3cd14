package daemon

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestKubeOVNSeedManifests loads seeds 003 and 004 as their documentation
// writes them: the manifests mode holds every object (no "unsupported
// kind"), the watcher yields the Subnets and the NetworkAttachmentDefinition
// typed, and `ovnedge render` accepts the directory.
func TestKubeOVNSeedManifests(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := NewManifestSource("testdata/kubeovn", log)
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	w := NewWatcher(src.Clientset, src.Dynamic, log, WatchKubeOVN())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Subnets) != 2 || len(s.NADs) != 1 || len(s.Services) != 2 {
		t.Fatalf("%d subnets, %d NADs, %d services", len(s.Subnets), len(s.NADs), len(s.Services))
	}
	attach, underlay := s.Subnets[0], s.Subnets[1]
	if attach.Name != "attach-subnet" || attach.Spec.Provider != "lb-svc-attachment.kube-system" || attach.Spec.CIDRBlock != "172.18.0.0/16" ||
		attach.Spec.Gateway != "172.18.0.1" || !slices.Equal(attach.Spec.ExcludeIps, []string{"172.18.0.0..172.18.0.10"}) || attach.Spec.Protocol != "IPv4" {
		t.Errorf("attach-subnet %+v", attach.Spec)
	}
	if underlay.Name != "underlay-subnet" || !underlay.Spec.EnableExternalLBAddress || underlay.Spec.NatOutgoing || underlay.Spec.Provider != "ovn" ||
		len(underlay.Spec.ExcludeIps) != 3 {
		t.Errorf("underlay-subnet %+v", underlay.Spec)
	}
	if n := s.NADs[0]; n.Namespace != "kube-system" || n.Name != "lb-svc-attachment" || !strings.Contains(n.Spec.Config, `"macvlan"`) {
		t.Errorf("NAD %s/%s %q", n.Namespace, n.Name, n.Spec.Config)
	}
	pools, err := attach.Pools()
	if err != nil || len(pools) != 1 || pools[0].Usable(pools[0].Gateway) == nil {
		t.Errorf("pools %v, %v", pools, err)
	}

	var out, errOut strings.Builder
	if code := Main(context.Background(), []string{"render", "--manifests", "testdata/kubeovn", "--what", "nb"}, &out, &errOut); code != 0 {
		t.Fatalf("render: exit %d:\n%s", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "unsupported kind") {
		t.Errorf("render: %s", errOut.String())
	}
}
