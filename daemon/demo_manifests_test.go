package daemon

import (
	"testing"

	"github.com/ovnedge/ovnedge/manifests"
)

// TestDemoManifestsLoad keeps examples/demo loadable.
func TestDemoManifestsLoad(t *testing.T) {
	objs, err := manifests.Load("../examples/demo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		n += len(o)
	}
	if n != 9 {
		t.Errorf("examples/demo holds %d objects, want 9", n)
	}
}
