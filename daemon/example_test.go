package daemon_test

import (
	"context"
	"os"

	"github.com/ovnedge/ovnedge/daemon"
)

// Render the bridge flows ovnedge programs on node ovn-worker2 for the
// demo manifests, touching nothing: `ovnedge render`.
func ExampleMain_render() {
	daemon.Main(context.Background(), []string{"render", "--manifests", "../examples/demo", "--node", "ovn-worker2",
		"--what", "flows", "--cluster-subnets", "10.244.0.0/16/24", "--bridge", "breth0", "--uplink", "eth1"}, os.Stdout, os.Stderr)
	// Output:
	// cookie=0x8cf786f7b1a8fe51, priority=110,arp,in_port=eth1,arp_tpa=172.18.0.200,arp_op=1 actions=LOCAL
	// cookie=0xdc198b61cf50ba19, priority=110,arp,in_port=eth1,arp_tpa=172.18.0.201,arp_op=1 actions=LOCAL
	// cookie=0x8cf786f7b1a8fe51, priority=110,icmp,in_port=eth1,nw_dst=172.18.0.200,icmp_type=3,icmp_code=4 actions=output:patch-breth0_ovn-worker2-to-br-int
	// cookie=0xdc198b61cf50ba19, priority=110,icmp,in_port=eth1,nw_dst=172.18.0.201,icmp_type=3,icmp_code=4 actions=output:patch-breth0_ovn-worker2-to-br-int
	// cookie=0x8cf786f7b1a8fe51, priority=110,tcp,in_port=eth1,nw_dst=172.18.0.200,tp_dst=80 actions=output:patch-breth0_ovn-worker2-to-br-int
	// cookie=0xdc198b61cf50ba19, priority=110,tcp,in_port=eth1,nw_dst=172.18.0.201,tp_dst=443 actions=output:patch-breth0_ovn-worker2-to-br-int
	// cookie=0xfaf506bd3dd884b6, priority=110,tcp,in_port=eth1,tp_dst=30080 actions=output:patch-breth0_ovn-worker2-to-br-int
	// cookie=0x8cf786f7b1a8fe51, priority=110,tcp,in_port=patch-breth0_ovn-worker2-to-br-int,dl_src=02:42:ac:12:00:03,nw_src=172.18.0.200,tp_src=80 actions=output:eth1
	// cookie=0xdc198b61cf50ba19, priority=110,tcp,in_port=patch-breth0_ovn-worker2-to-br-int,dl_src=02:42:ac:12:00:03,nw_src=172.18.0.201,tp_src=443 actions=output:eth1
	// cookie=0xfaf506bd3dd884b6, priority=110,tcp,in_port=patch-breth0_ovn-worker2-to-br-int,dl_src=02:42:ac:12:00:03,tp_src=30080 actions=output:eth1
	// cookie=0xdeff105, priority=109,ip,in_port=patch-breth0_ovn-worker2-to-br-int,nw_src=10.244.2.0/24 actions=ct(commit,zone=64000,exec(set_field:0x1->ct_mark)),output:eth1
	// cookie=0xdeff105, priority=105,pkt_mark=0x3f0,ip,in_port=patch-breth0_ovn-worker2-to-br-int actions=ct(commit,zone=64000,nat(src=172.18.0.3),exec(load:0x1->NXM_NX_CT_MARK[])),output:eth1
	// cookie=0xdeff105, priority=104,ip,in_port=patch-breth0_ovn-worker2-to-br-int,nw_src=10.244.0.0/16 actions=drop
	// cookie=0xdeff105, priority=100,ip,in_port=LOCAL actions=ct(commit,zone=64000,exec(set_field:0x2->ct_mark)),output:eth1
	// cookie=0xdeff105, priority=100,ip,in_port=patch-breth0_ovn-worker2-to-br-int actions=ct(commit,zone=64000,exec(set_field:0x1->ct_mark)),output:eth1
	// cookie=0xdeff105, priority=50,ip,dl_dst=02:42:ac:12:00:03 actions=ct(table=1,zone=64000,nat)
	// cookie=0xdeff105, priority=10,dl_dst=02:42:ac:12:00:03 actions=output:patch-breth0_ovn-worker2-to-br-int,NORMAL
	// cookie=0xdeff105, priority=10,in_port=patch-breth0_ovn-worker2-to-br-int,dl_src=02:42:ac:12:00:03 actions=NORMAL
	// cookie=0xdeff105, priority=9,in_port=patch-breth0_ovn-worker2-to-br-int actions=drop
	// cookie=0xdeff105, priority=0 actions=NORMAL
	// cookie=0xdeff105, table=1, priority=100,ct_state=+est+trk,ct_mark=0x1,ip actions=output:patch-breth0_ovn-worker2-to-br-int
	// cookie=0xdeff105, table=1, priority=100,ct_state=+est+trk,ct_mark=0x2,ip actions=LOCAL
	// cookie=0xdeff105, table=1, priority=100,ct_state=+rel+trk,ct_mark=0x1,ip actions=output:patch-breth0_ovn-worker2-to-br-int
	// cookie=0xdeff105, table=1, priority=100,ct_state=+rel+trk,ct_mark=0x2,ip actions=LOCAL
	// cookie=0xdeff105, table=1, priority=10,dl_dst=02:42:ac:12:00:03 actions=LOCAL
	// cookie=0xdeff105, table=1, priority=0 actions=NORMAL
}
