package e2e

import (
	"net/netip"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestZZDebug(t *testing.T) {
	e := shared.With(t)
	vip := netip.MustParseAddr("172.18.0.150")
	createService(t, e, service("shop", "ext", "web", corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyCluster, vip.String()))
	via(t, e, vip, w1)
	f, _ := os.Create("/tmp/dbg.env")
	f.WriteString("NB=" + e.OVN.NB + "\nSB=" + e.OVN.SB + "\nCLIENT=" + e.Client.Name + "\n")
	for _, n := range e.Nodes {
		f.WriteString(n.Name + "=" + n.NS.Name + " " + n.Dir + "\n")
	}
	f.Close()
	time.Sleep(600 * time.Second)
}
