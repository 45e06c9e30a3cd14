package testbed

import (
	"os"
	"path/filepath"
)

// WriteFile writes content to dir/name, failing the test on error.
func WriteFile(t T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
}

// EgressIPManifest is an EgressIP (eip1, 172.18.0.33) of the namespaces
// labelled env=prod, as a manifest.
const EgressIPManifest = `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata:
  name: eip1
spec:
  egressIPs: ["172.18.0.33"]
  namespaceSelector:
    matchLabels: {env: prod}
`

// NodeManifest is node ovn-worker with the labels given in YAML flow
// syntax ("a: b"), as a manifest.
func NodeManifest(labels string) string {
	return "apiVersion: v1\nkind: Node\nmetadata:\n  name: ovn-worker\n  labels: {" + labels + "}\n"
}
