package ovsflow

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// OfctlTransport applies flows by running ovs-ofctl (OpenFlow 1.3), the way
// OVN-Kubernetes and Kube-OVN do.
type OfctlTransport struct {
	// RunDir is the directory of the bridges' `<bridge>.mgmt` sockets
	// (OVS_RUNDIR); /var/run/openvswitch when empty.
	RunDir string
	// Binary is the ovs-ofctl to run; "ovs-ofctl" when empty.
	Binary string
}

func (t *OfctlTransport) sock(bridge string) string {
	dir := t.RunDir
	if dir == "" {
		dir = "/var/run/openvswitch"
	}
	return filepath.Join(dir, bridge+".mgmt")
}

func (t *OfctlTransport) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	bin := t.Binary
	if bin == "" {
		bin = "ovs-ofctl"
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"-O", "OpenFlow13"}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", bin, args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Dump runs dump-flows.
func (t *OfctlTransport) Dump(ctx context.Context, bridge string) ([]byte, error) {
	return t.run(ctx, nil, "--no-stats", "dump-flows", "unix:"+t.sock(bridge))
}

// Replace runs `--bundle replace-flows`.
func (t *OfctlTransport) Replace(ctx context.Context, bridge string, flows []byte) error {
	if flows == nil {
		flows = []byte{}
	}
	_, err := t.run(ctx, flows, "--bundle", "replace-flows", "unix:"+t.sock(bridge), "-")
	return err
}

// Bundle runs `--bundle add-flows` with one add, modify_strict or
// delete_strict line per modification.
func (t *OfctlTransport) Bundle(ctx context.Context, bridge string, mods []FlowMod) error {
	var b bytes.Buffer
	for _, m := range mods {
		b.WriteString(m.Op.String())
		b.WriteByte(' ')
		b.WriteString(m.Flow)
		b.WriteByte('\n')
	}
	_, err := t.run(ctx, b.Bytes(), "--bundle", "add-flows", "unix:"+t.sock(bridge), "-")
	return err
}

// Watch keeps an OpenFlow connection to the bridge's management socket
// (an [openflow.Client], which answers and sends echo requests and redials
// with backoff) and signals every successful handshake: the first one and
// each one after ovs-vswitchd restarted.
func (t *OfctlTransport) Watch(ctx context.Context, bridge string) <-chan struct{} {
	c := openflow.NewClient("unix", t.sock(bridge), openflow.Options{MaxVersion: openflow.Version13})
	context.AfterFunc(ctx, func() { c.Close() })
	return c.Watch(ctx)
}
