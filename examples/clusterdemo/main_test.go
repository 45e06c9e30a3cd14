package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemo runs `make demo` and checks its report: every VIP answered by
// a web pod, the ETP=Local ExternalIP with the client's own address, the
// egress pod seen from the egress IP, and a failover gap measured.
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
	if r.Gap <= 0 {
		t.Errorf("no failover gap measured")
	}
}
