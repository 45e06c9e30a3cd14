package manifests

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/ovnedge/ovnedge/testbed"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"nodes.yaml": `apiVersion: v1
kind: Node
metadata:
  name: ovn-worker
  labels: {k8s.ovn.org/egress-assignable: ""}
---
---
apiVersion: v1
kind: Namespace
metadata: {name: default}
`,
		"eip.yaml": `apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: egressip-prod}
spec:
  egressIPs: [172.18.0.33]
`,
		"broken.yaml": `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports: "not a list"
`,
		"noname.yml": "apiVersion: v1\nkind: Pod\nmetadata: {}\n",
		"notes.txt":  "ignored",
	}
	for name, text := range files {
		testbed.WriteFile(t, dir, name, text)
	}
	objs, err := Load(dir)
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("want ManifestErrors, got %v", err)
	}
	for _, bad := range []string{"broken.yaml", "noname.yml"} {
		if _, ok := objs[filepath.Join(dir, bad)]; ok {
			t.Errorf("%s should contribute nothing", bad)
		}
	}
	nodes := objs[filepath.Join(dir, "nodes.yaml")]
	if len(nodes) != 2 {
		t.Fatalf("nodes.yaml: %d objects, want 2", len(nodes))
	}
	if n, ok := nodes[0].(*corev1.Node); !ok || n.Name != "ovn-worker" || n.Labels["k8s.ovn.org/egress-assignable"] != "" {
		t.Errorf("node decoded as %#v", nodes[0])
	}
	if _, ok := nodes[1].(*corev1.Namespace); !ok {
		t.Errorf("namespace decoded as %T", nodes[1])
	}
	eip := objs[filepath.Join(dir, "eip.yaml")]
	if u, ok := eip[0].(*unstructured.Unstructured); !ok || u.GetKind() != "EgressIP" {
		t.Errorf("EgressIP decoded as %T", eip[0])
	}
}
