package manifests

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"

	"github.com/ovnedge/ovnedge/testbed"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
)

// TestSource runs real shared informers on the source and checks
// that creates, updates, a broken file and deletes reach them.
func TestSource(t *testing.T) {
	dir := t.TempDir()
	testbed.WriteFile(t, dir, "nodes.yaml", testbed.NodeManifest(`k8s.ovn.org/egress-assignable: ""`))
	testbed.WriteFile(t, dir, "eip.yaml", testbed.EgressIPManifest)

	src := NewSource(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(src.Clientset, 0)
	nodes := factory.Core().V1().Nodes().Lister()
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(src.Dynamic, 0)
	eips := dyn.ForResource(egressv1.Resource).Lister()
	factory.Start(ctx.Done())
	dyn.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	dyn.WaitForCacheSync(ctx.Done())

	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	nodeLabel := func(key string) (string, bool) {
		n, err := nodes.Get("ovn-worker")
		if err != nil {
			return "", false
		}
		v, ok := n.Labels[key]
		return v, ok
	}
	eventually("the node", func() bool { _, ok := nodeLabel("k8s.ovn.org/egress-assignable"); return ok })
	eventually("the EgressIP", func() bool { _, err := eips.Get("eip1"); return err == nil })

	// An update reaches the informer.
	testbed.WriteFile(t, dir, "nodes.yaml", testbed.NodeManifest(`zone: a`))
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload after update: %v", err)
	}
	eventually("the label change", func() bool { v, _ := nodeLabel("zone"); return v == "a" })

	// A broken file keeps its last good objects and says where it broke.
	testbed.WriteFile(t, dir, "nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: [oops\n")
	err := src.Reload()
	if err == nil {
		t.Fatal("Reload of a broken file returned no error")
	}
	t.Logf("broken file: %v", err)
	if _, err := nodes.Get("ovn-worker"); err != nil {
		t.Fatalf("the node of the broken file was removed: %v", err)
	}

	// Two files defining one object: an error, the first file wins.
	testbed.WriteFile(t, dir, "nodes.yaml", testbed.NodeManifest(`zone: a`))
	testbed.WriteFile(t, dir, "nodes2.yaml", testbed.NodeManifest(`zone: b`))
	if err := src.Reload(); err == nil {
		t.Fatal("a duplicate object gave no error")
	}
	if v, _ := nodeLabel("zone"); v != "a" {
		t.Fatalf("zone = %q, want the first file's a", v)
	}

	// Deleting the files deletes the objects.
	for _, f := range []string{"nodes.yaml", "nodes2.yaml", "eip.yaml"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload after delete: %v", err)
	}
	eventually("the node's deletion", func() bool { _, err := nodes.Get("ovn-worker"); return err != nil })
	eventually("the EgressIP's deletion", func() bool { _, err := eips.Get("eip1"); return err != nil })

	// The typed client sees the same objects.
	if l, err := src.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("nodes after delete: %v, %v", l, err)
	}
}

// TestSourceWatch checks that Watch picks up a file written after
// it started.
func TestSourceWatch(t *testing.T) {
	dir := t.TempDir()
	src := NewSource(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Watch(ctx, 10*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testbed.WriteFile(t, dir, "nodes.yaml", testbed.NodeManifest(`a: b`))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := src.Clientset.CoreV1().Nodes().Get(ctx, "ovn-worker", metav1.GetOptions{}); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch did not load the new file")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
