package ovsflow

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/digitalocean/go-openvswitch/ovs"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// OfctlTransport applies flows by running ovs-ofctl (OpenFlow 1.3), the way
// OVN-Kubernetes and Kube-OVN do. A bundle of adds goes through
// go-openvswitch's ovs client (OpenFlow.AddFlowBundle, flows converted by
// [ToOVS]); everything go-openvswitch cannot carry without loss runs
// ovs-ofctl directly, with the same command lines as before it:
//   - a bundle with modify_strict or delete_strict (go-openvswitch's
//     bundles add and delete non-strictly only; a non-strict delete also
//     removes every more specific flow, whatever its priority), or with a
//     flow [ToOVS] cannot convert (a group action, say);
//   - [OfctlTransport.Replace]: go-openvswitch has no replace-flows;
//   - [OfctlTransport.Dump]: go-openvswitch's DumpFlows parses each flow
//     into an ovs.Flow and drops match fields it does not know (pkt_mark)
//     or fails on actions (pop_vlan), and has no --no-stats; the dump is
//     read by this package's parser instead.
//
// Going through go-openvswitch costs: each flow is parsed, converted and
// rendered again by go-openvswitch, so installing 20,000 flows takes about
// 30% longer and allocates about twice as much as writing the text straight
// to ovs-ofctl did (BenchmarkNativeVsOfctl/Install; docs/benchmarks.md).
// The default [NativeTransport] does not pay it.
type OfctlTransport struct {
	// RunDir is the directory of the bridges' `<bridge>.mgmt` sockets
	// (OVS_RUNDIR); /var/run/openvswitch when empty.
	RunDir string
	// Binary is the ovs-ofctl to run; "ovs-ofctl" when empty.
	Binary string
}

// ofctl is the command go-openvswitch runs.
const ofctl = "ovs-ofctl"

func (t *OfctlTransport) sock(bridge string) string {
	dir := t.RunDir
	if dir == "" {
		dir = "/var/run/openvswitch"
	}
	return filepath.Join(dir, bridge+".mgmt")
}

// target is the bridge's management socket, which ovs-ofctl takes in place
// of a bridge name.
func (t *OfctlTransport) target(bridge string) string { return "unix:" + t.sock(bridge) }

// run runs the ovs-ofctl binary with args and stdin (nil: none) and
// returns its standard output; an error carries the command line and
// ovs-ofctl's standard error.
func (t *OfctlTransport) run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	bin := cmp.Or(t.Binary, ofctl)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// client is a go-openvswitch client speaking OpenFlow 1.3 whose ovs-ofctl
// is t.run under ctx (the binary t names, cancelled with ctx). go-openvswitch
// flattens a failed command to a string; the error t.run returned is kept
// in *runErr.
func (t *OfctlTransport) client(ctx context.Context, runErr *error) *ovs.Client {
	do := func(stdin io.Reader, cmd string, args []string) ([]byte, error) {
		if cmd != ofctl {
			*runErr = fmt.Errorf("go-openvswitch ran %q, not %s", cmd, ofctl)
			return nil, *runErr
		}
		var out []byte
		out, *runErr = t.run(ctx, stdin, args...)
		return out, *runErr
	}
	return ovs.New(
		ovs.Protocols([]string{ovs.ProtocolOpenFlow13}),
		ovs.Exec(func(cmd string, args ...string) ([]byte, error) { return do(nil, cmd, args) }),
		ovs.Pipe(func(stdin io.Reader, cmd string, args ...string) ([]byte, error) { return do(stdin, cmd, args) }),
	)
}

// Dump runs `ovs-ofctl -O OpenFlow13 --no-stats dump-flows`.
func (t *OfctlTransport) Dump(ctx context.Context, bridge string) ([]byte, error) {
	return t.run(ctx, nil, "-O", "OpenFlow13", "--no-stats", "dump-flows", t.target(bridge))
}

// Replace runs `ovs-ofctl -O OpenFlow13 --bundle replace-flows` with flows
// on its standard input.
func (t *OfctlTransport) Replace(ctx context.Context, bridge string, flows []byte) error {
	_, err := t.run(ctx, bytes.NewReader(flows), "-O", "OpenFlow13", "--bundle", "replace-flows", t.target(bridge), "-")
	return err
}

// Bundle applies mods in one atomic bundle. Adds only go through
// go-openvswitch: `ovs-ofctl --bundle add-flow --protocols=OpenFlow13
// <socket> -` with one "add <flow>" line per flow as ovs.Flow renders it
// (every field in place, table=, idle_timeout=0 and a zero-padded cookie
// added). Otherwise it runs `ovs-ofctl -O OpenFlow13 --bundle add-flows
// <socket> -` with one add, modify_strict or delete_strict line per
// modification in this package's canonical text.
func (t *OfctlTransport) Bundle(ctx context.Context, bridge string, mods []FlowMod) error {
	if flows, err := ovsAdds(mods); err == nil {
		return t.addBundle(ctx, bridge, flows)
	}
	var b bytes.Buffer
	for _, m := range mods {
		b.WriteString(m.Op.String())
		b.WriteByte(' ')
		b.WriteString(m.Flow)
		b.WriteByte('\n')
	}
	_, err := t.run(ctx, &b, "-O", "OpenFlow13", "--bundle", "add-flows", t.target(bridge), "-")
	return err
}

// addBundle adds flows in one bundle through go-openvswitch's
// AddFlowBundle.
func (t *OfctlTransport) addBundle(ctx context.Context, bridge string, flows []*ovs.Flow) error {
	var runErr error
	err := t.client(ctx, &runErr).OpenFlow.AddFlowBundle(t.target(bridge), func(tx *ovs.FlowTransaction) error {
		tx.Add(flows...)
		return tx.Commit()
	})
	if runErr != nil {
		return runErr
	}
	if err != nil {
		return fmt.Errorf("go-openvswitch bundle of %d flows for %s: %w", len(flows), bridge, err)
	}
	return nil
}

// ovsAdds converts mods to go-openvswitch flows when go-openvswitch can
// carry them: every mod an add and every flow one [ToOVS] converts.
// ToOVS refuses every field an ovs.Flow cannot express, and
// TestOVSGoldenRoundTrip proves that what it accepts renders back to the
// same flow, so the conversion is not checked again per flow here.
func ovsAdds(mods []FlowMod) ([]*ovs.Flow, error) {
	flows := make([]*ovs.Flow, 0, len(mods))
	for _, m := range mods {
		if m.Op != ModAdd {
			return nil, fmt.Errorf("%s: go-openvswitch bundles have no strict modify or delete", m.Op)
		}
		f, err := ParseFlow(m.Flow)
		if err != nil {
			return nil, err
		}
		of, err := ToOVS(f)
		if err != nil {
			return nil, err
		}
		flows = append(flows, of)
	}
	return flows, nil
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
