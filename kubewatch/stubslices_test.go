package kubewatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ovnedge/ovnedge/manifests"
)

// TestNodeSliceStubs: a node instance keeps the EndpointSlice of a Service
// no node has work for as a stub, and reads it whole again (fetched from
// the API) once the Service has an external IP; a later change of the
// slice reads as it is; once the Service is a stub again, so is its next
// version. A Service with work keeps its slice compacted, never a stub.
func TestNodeSliceStubs(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := manifests.NewSource(t.TempDir(), log)
	w := NewWatcher(src.Clientset, src.Dynamic, log, ForNode("n1"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	core, disc := src.Clientset.CoreV1().Services("ns"), src.Clientset.DiscoveryV1().EndpointSlices("ns")
	service := func(name string, externalIP ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ExternalIPs: externalIP,
				Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	slice := func(svc string, addrs ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}}}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("n1"),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		return s
	}
	// read waits until the Watcher's slice of svc has want endpoints (-1:
	// a stub).
	read := func(svc string, want int) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			s, err := w.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			got = "none"
			for _, es := range s.EndpointSlices {
				if es.Labels[discoveryv1.LabelServiceName] != svc {
					continue
				}
				n := len(es.Endpoints)
				if isStub(es) {
					n = -1
					if len(es.Endpoints)+len(es.Ports) > 0 {
						t.Fatalf("stub %s with endpoints or ports: %+v", es.Name, es)
					}
				}
				if got = fmt.Sprint(n); n == want {
					return
				}
			}
		}
		t.Fatalf("slice of %s: %s endpoints, want %d (-1: a stub)", svc, got, want)
	}
	create := func(svc *corev1.Service, s *discoveryv1.EndpointSlice) {
		t.Helper()
		if _, err := core.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The Service is stored (and its stub noted) before its slice
		// comes, as at a node instance's start.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if s, _ := w.Snapshot(); slices.ContainsFunc(s.Services, func(x *corev1.Service) bool { return x.Name == svc.Name }) {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("Service %s not stored", svc.Name)
			}
		}
		if _, err := disc.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(svc *corev1.Service, s *discoveryv1.EndpointSlice) {
		t.Helper()
		if svc != nil {
			if _, err := core.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if s != nil {
			if _, err := disc.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	create(service("a"), slice("a", "10.0.0.1", "10.0.0.2"))
	create(service("b", "192.0.2.10"), slice("b", "10.0.0.3"))
	read("a", -1)
	read("b", 1)
	update(service("a", "192.0.2.11"), nil) // a needs the nodes now: fetched whole
	read("a", 2)
	update(nil, slice("a", "10.0.0.1", "10.0.0.2", "10.0.0.4"))
	read("a", 3)
	update(service("a"), nil) // a stub again: its next version too
	time.Sleep(100 * time.Millisecond)
	update(nil, slice("a", "10.0.0.1"))
	read("a", -1)
	read("b", 1)
}
