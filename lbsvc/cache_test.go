package lbsvc_test

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ovnedge/ovnedge/lbsvc"
)

// TestCache builds through one Cache after each of a sequence of edits,
// made the way an informer makes them (a changed object is a new
// object): the result always equals Build's, unchanged Services are
// reused and changed ones recomputed.
func TestCache(t *testing.T) {
	in := cluster()
	find := func(name string) int {
		return slices.IndexFunc(in.Services, func(s *corev1.Service) bool { return s.Name == name })
	}
	findSlice := func(name string) int {
		return slices.IndexFunc(in.EndpointSlices, func(s *discoveryv1.EndpointSlice) bool { return s.Name == name })
	}
	var c lbsvc.Cache
	opts := lbsvc.Options{}
	steps := []struct {
		name      string
		edit      func()
		recompute []string // Services whose states must be new objects
	}{
		{"first build", func() {}, []string{"web", "lb-cluster", "lb-local", "draining", "headless", "fqdn"}},
		{"nothing changed", func() {}, nil},
		{"store order changes", func() { slices.Reverse(in.Services); slices.Reverse(in.EndpointSlices) }, nil},
		{"a Service changes", func() {
			s := in.Services[find("web")].DeepCopy()
			s.Spec.Ports[0].Port = 8080
			in.Services[find("web")] = s
		}, []string{"web"}},
		{"an EndpointSlice changes", func() {
			e := in.EndpointSlices[findSlice("lb-local-v6")].DeepCopy()
			e.Endpoints[0].Addresses = []string{"fd00:10:244:1::21"}
			in.EndpointSlices[findSlice("lb-local-v6")] = e
		}, []string{"lb-local"}},
		{"an EndpointSlice goes", func() { in.EndpointSlices = slices.Delete(in.EndpointSlices, findSlice("web-a"), findSlice("web-a")+1) },
			[]string{"web"}},
		{"a Service goes", func() { in.Services = slices.Delete(in.Services, find("fqdn"), find("fqdn")+1) }, nil},
		{"and comes back", func() {
			in.Services = append(in.Services, svc("fqdn", corev1.ServiceTypeClusterIP, []string{"10.96.0.50"}, port("", corev1.ProtocolTCP, 80, 0, "80")))
		}, []string{"fqdn"}},
		{"a node changes", func() { in.Nodes = in.Nodes[:1] }, []string{"web", "lb-cluster", "lb-local", "draining", "headless", "fqdn"}},
		{"the options change", func() { opts.HairpinSNATIP = "169.254.0.9" }, []string{"web", "lb-cluster", "lb-local", "draining", "headless", "fqdn"}},
	}
	prev := map[string]uintptr{} // Service -> the address of its load balancers
	for _, step := range steps {
		step.edit()
		got, gotEvents := c.Build(in, opts)
		want, wantEvents := lbsvc.Build(in, opts)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotEvents, wantEvents) {
			t.Fatalf("%s: cached build differs from Build:\n%v\nwant\n%v", step.name, got, want)
		}
		now := map[string]uintptr{}
		for _, s := range in.Services {
			if lbs := got[lbsvc.ServiceOwner(s.Namespace, s.Name)].LoadBalancers; len(lbs) > 0 {
				now[s.Name] = reflect.ValueOf(lbs).Pointer()
			}
		}
		for name, addr := range now {
			if recomputed := addr != prev[name]; recomputed != slices.Contains(step.recompute, name) {
				t.Errorf("%s: Service %s recomputed %v, want %v", step.name, name, recomputed, !recomputed)
			}
		}
		prev = now
	}
}
