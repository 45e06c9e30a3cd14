// Command arpbypass builds the ARP/NDP bypass of one Service's VIPs and
// applies it to a bridge: ARP requests (and IPv6 neighbour solicitations)
// for the VIPs coming in on the uplink go to the host (LOCAL), not to OVN.
//
//	go run ./examples/arpbypass --ovs-db unix:/var/run/openvswitch/db.sock \
//	    --bridge br-ex --uplink eth0 --vip 172.18.0.50 --port 80
//
// It sends only the difference from what the bridge holds, in one atomic
// bundle, and leaves other controllers' flows alone. The flows carry
// OVN-Kubernetes' own cookie for the Service (brex.ServiceCookie), and an
// Applier treats every flow with a cookie of its program as its own: on a
// bridge where ovnkube-node programs that Service (its VIP flows share the
// cookie) the run would remove those, so it is for bridges whose Service
// flows nothing else programs (ovnkube-node installs the bypass itself).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/ovnedge/ovnedge/ovsflow"
	"github.com/ovnedge/ovnedge/ovsflow/brex"
)

// Options say which bridge and Service.
type Options struct {
	OVSDB, RunDir, Bridge, Uplink string
	Namespace, Name               string
	VIPs                          []netip.Addr
	Port                          int32
}

func main() {
	var o Options
	vip := flag.String("vip", "172.18.0.50", "the Service's VIP")
	port := flag.Int("port", 80, "the Service's port")
	flag.StringVar(&o.OVSDB, "ovs-db", "unix:/var/run/openvswitch/db.sock", "Open_vSwitch database")
	flag.StringVar(&o.RunDir, "ovs-rundir", "/var/run/openvswitch", "directory of <bridge>.mgmt")
	flag.StringVar(&o.Bridge, "bridge", "br-ex", "the bridge")
	flag.StringVar(&o.Uplink, "uplink", "eth0", "the bridge port of the NIC")
	flag.StringVar(&o.Namespace, "namespace", "default", "the Service's namespace")
	flag.StringVar(&o.Name, "name", "web", "the Service's name")
	flag.Parse()
	addr, err := netip.ParseAddr(*vip)
	if err != nil {
		fmt.Fprintln(os.Stderr, "arpbypass: --vip:", err)
		os.Exit(2)
	}
	o.VIPs, o.Port = []netip.Addr{addr}, int32(*port)
	if err := Run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "arpbypass:", err)
		os.Exit(1)
	}
}

// Run builds the Service's bypass flows and applies them to the bridge.
func Run(ctx context.Context, o Options, out io.Writer) error {
	svc := brex.Service{Namespace: o.Namespace, Name: o.Name, VIPs: o.VIPs, Ports: []int32{o.Port}}
	flows, err := brex.ARPBypass(brex.Bypass{Uplink: o.Uplink}, svc)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	var p ovsflow.Program
	if err := p.Set(svc.Owner(), flows); err != nil {
		return fmt.Errorf("program: %w", err)
	}
	ports, err := ovsflow.DialOVSDBPorts(ctx, o.OVSDB)
	if err != nil {
		return fmt.Errorf("open_vswitch database: %w", err)
	}
	defer ports.Close()
	tr := ovsflow.NewNativeTransport(o.RunDir, ovsflow.NativeOptions{})
	defer tr.Close()
	a := ovsflow.NewApplier(o.Bridge, tr, ports, ovsflow.ApplierOptions{KeepForeign: true})
	res, err := a.Apply(ctx, &p)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	fmt.Fprintf(out, "%s: %d flows added, %d modified, %d deleted\n", o.Bridge, res.Added, res.Modified, res.Deleted)
	for _, f := range flows {
		fmt.Fprintln(out, f.String())
	}
	return nil
}
