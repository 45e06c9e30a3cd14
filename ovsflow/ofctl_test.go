package ovsflow_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex/brextest"
	"github.com/ovnedge/ovnedge/ovsflow/flowtest"
)

// recordingOfctl writes a stand-in for ovs-ofctl into dir that saves its
// arguments (one a line) to dir/args and its standard input to dir/stdin,
// then runs tail (a shell command line).
func recordingOfctl(t *testing.T, dir, tail string) string {
	t.Helper()
	bin := filepath.Join(dir, "ovs-ofctl")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + filepath.Join(dir, "args") +
		"\ncat > " + filepath.Join(dir, "stdin") + "\n" + tail + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What each OfctlTransport method hands ovs-ofctl, to the byte: through
// go-openvswitch for a bundle of adds, directly (as before go-openvswitch)
// for the rest.
func TestOfctlCommandLines(t *testing.T) {
	const (
		add    = "cookie=0xef7cfc72b9c72966, priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1 actions=LOCAL"
		ovsAdd = "priority=110,arp,in_port=1,arp_tpa=172.18.0.50,arp_op=1,table=0,idle_timeout=0,cookie=0xef7cfc72b9c72966,actions=local"
		group  = "priority=300,udp actions=group:99"
		key    = "table=1, priority=10,dl_dst=02:42:ac:12:00:03"
	)
	cases := []struct {
		name  string
		call  func(context.Context, *ovsflow.OfctlTransport) error
		args  string // with SOCK for the management socket
		stdin string
	}{
		{"dump", func(ctx context.Context, tr *ovsflow.OfctlTransport) error {
			_, err := tr.Dump(ctx, "br0")
			return err
		}, "-O OpenFlow13 --no-stats dump-flows SOCK", ""},
		{"replace", func(ctx context.Context, tr *ovsflow.OfctlTransport) error {
			return tr.Replace(ctx, "br0", []byte(add+"\n"))
		}, "-O OpenFlow13 --bundle replace-flows SOCK -", add + "\n"},
		{"adds through go-openvswitch", func(ctx context.Context, tr *ovsflow.OfctlTransport) error {
			return tr.Bundle(ctx, "br0", []ovsflow.FlowMod{{Op: ovsflow.ModAdd, Flow: add}})
		}, "--bundle add-flow --protocols=OpenFlow13 SOCK -", "add " + ovsAdd + "\n"},
		{"strict modify and delete", func(ctx context.Context, tr *ovsflow.OfctlTransport) error {
			return tr.Bundle(ctx, "br0", []ovsflow.FlowMod{{Op: ovsflow.ModDeleteStrict, Flow: key},
				{Op: ovsflow.ModAdd, Flow: add}, {Op: ovsflow.ModModifyStrict, Flow: add}})
		}, "-O OpenFlow13 --bundle add-flows SOCK -", "delete_strict " + key + "\nadd " + add + "\nmodify_strict " + add + "\n"},
		{"an add go-openvswitch cannot hold", func(ctx context.Context, tr *ovsflow.OfctlTransport) error {
			return tr.Bundle(ctx, "br0", []ovsflow.FlowMod{{Op: ovsflow.ModAdd, Flow: add}, {Op: ovsflow.ModAdd, Flow: group}})
		}, "-O OpenFlow13 --bundle add-flows SOCK -", "add " + add + "\nadd " + group + "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := &ovsflow.OfctlTransport{RunDir: dir, Binary: recordingOfctl(t, dir, "")}
			if err := c.call(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(c.args, "SOCK", "unix:"+filepath.Join(dir, "br0.mgmt"))
			if got := strings.Join(strings.Fields(readFile(t, filepath.Join(dir, "args"))), " "); got != want {
				t.Errorf("arguments\n got %s\nwant %s", got, want)
			}
			if got := readFile(t, filepath.Join(dir, "stdin")); got != c.stdin {
				t.Errorf("standard input\n got %q\nwant %q", got, c.stdin)
			}
		})
	}
}

// A failing ovs-ofctl is an error with its command line and standard
// error, on either path.
func TestOfctlErrors(t *testing.T) {
	const add = "priority=1 actions=NORMAL"
	for _, mods := range [][]ovsflow.FlowMod{
		{{Op: ovsflow.ModAdd, Flow: add}},
		{{Op: ovsflow.ModModifyStrict, Flow: add}},
	} {
		dir := t.TempDir()
		tr := &ovsflow.OfctlTransport{RunDir: dir, Binary: recordingOfctl(t, dir, "echo 'ovs-ofctl: br0 is not a bridge' >&2; exit 1")}
		err := tr.Bundle(context.Background(), "br0", mods)
		if err == nil || !strings.Contains(err.Error(), "br0 is not a bridge") || !strings.Contains(err.Error(), "--bundle") {
			t.Errorf("%s: error %v, want ovs-ofctl's command line and standard error", mods[0].Op, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	tr := &ovsflow.OfctlTransport{RunDir: dir, Binary: recordingOfctl(t, dir, "")}
	if err := tr.Bundle(ctx, "br0", []ovsflow.FlowMod{{Op: ovsflow.ModAdd, Flow: add}}); err == nil {
		t.Error("a cancelled context must stop ovs-ofctl")
	}
}

// Bundles of adds that go through go-openvswitch install every golden
// program on a real bridge: its dump equals the golden file.
func TestOfctlAddBundleOnRealBridge(t *testing.T) {
	t.Parallel()
	br := brextest.NewBridge(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	wrapper := filepath.Join(dir, "ovs-ofctl")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$*\" >> "+log+"\nexec ovs-ofctl \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr := &ovsflow.OfctlTransport{RunDir: br.RunDir, Binary: wrapper}
	ctx := ctxFor(t)
	for _, g := range brextest.Goldens {
		text, err := brextest.MustProgram(t, g.Parts).Render(brextest.Ports)
		if err != nil {
			t.Fatal(err)
		}
		var mods []ovsflow.FlowMod
		for line := range strings.Lines(string(text)) {
			mods = append(mods, ovsflow.FlowMod{Op: ovsflow.ModAdd, Flow: strings.TrimSpace(line)})
		}
		if err := tr.Replace(ctx, br.Bridge, nil); err != nil {
			t.Fatal(err)
		}
		if err := tr.Bundle(ctx, br.Bridge, mods); err != nil {
			t.Fatalf("%s: %v", g.File, err)
		}
		if got := br.Dump(); string(got) != string(text) {
			t.Errorf("%s: bridge dump differs from the golden file:\n%s", g.File, flowtest.Diff(string(text), string(got)))
		}
	}
	if n := strings.Count(readFile(t, log), "--bundle add-flow --protocols=OpenFlow13 unix:"); n != len(brextest.Goldens) {
		t.Errorf("%d bundles went through go-openvswitch, want %d:\n%s", n, len(brextest.Goldens), readFile(t, log))
	}
}
