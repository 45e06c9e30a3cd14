package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemo runs `make demo` and checks its report: every VIP answered by
// a web pod, the ETP=Local ExternalIP with the client's own address, the
// egress pod seen from the egress IP, a failover gap measured, and the
// Lease held off the egress-assignable nodes.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	r := Run(context.Background(), t, &out)
	t.Logf("report:\n%s", out.String())
	if len(r.Answers) != 4 {
		t.Fatalf("answers %v", r.Answers)
	}
	for _, a := range r.Answers {
		if !strings.Contains(a, " web-") {
			t.Errorf("answer %q is not from a web pod", a)
		}
		if strings.HasPrefix(a, externalIP) && !strings.Contains(a, " 172.18.0.100:") {
			t.Errorf("ETP=Local answer %q: the backend did not see the client's address", a)
		}
	}
	if !strings.HasPrefix(r.EgressSource, egressIP+":") {
		t.Errorf("egress source %q, want %s", r.EgressSource, egressIP)
	}
	if !strings.HasPrefix(r.ServiceSource, "172.18.0.20") {
		t.Errorf("EgressService source %q, want the LoadBalancer IP", r.ServiceSource)
	}
	if r.Gap <= 0 {
		t.Errorf("no failover gap measured")
	}
	if r.Holder != w1 {
		t.Errorf("the Lease's holder ran on %q when the egress node was killed, want %s, the one node that is not egress-assignable", r.Holder, w1)
	}
	if len(r.Ranges) != 3 || !strings.Contains(r.Ranges[0], "answered by web-") || !strings.Contains(r.Ranges[1], "gets nothing") ||
		!strings.Contains(r.Ranges[2], "answered by web-") {
		t.Errorf("source ranges: %q", r.Ranges)
	}
}

// TestDemoKubeOVN runs `make demo FLAVOR=kube-ovn` and checks its report:
// the lb-svc Deployment runs `ovnedge lbsvc-agent`, every request to the
// LoadBalancer IP is answered by a backend that saw the lb-svc pod's
// address, the re-created pod's included.
func TestDemoKubeOVN(t *testing.T) {
	var out bytes.Buffer
	r := RunKubeOVN(context.Background(), t, &out)
	t.Logf("report:\n%s", out.String())
	if r.Deployment != "default/lb-svc-test-service" || len(r.Command) < 2 || r.Command[0] != "ovnedge" || r.Command[1] != "lbsvc-agent" {
		t.Errorf("Deployment %s runs %q", r.Deployment, r.Command)
	}
	if len(r.Answers) != 6 {
		t.Fatalf("answers %q", r.Answers)
	}
	for i, a := range r.Answers {
		lbPod := r.LBPodIP
		if i >= 4 {
			lbPod = r.RecreatedIP
		}
		if !strings.Contains(a, " dynamic-") || !strings.Contains(a, " "+lbPod+":") {
			t.Errorf("answer %q: want a dynamic pod seeing the lb-svc pod %s", a, lbPod)
		}
	}
	if r.Resumed <= 0 {
		t.Errorf("no time to resume measured")
	}
}
