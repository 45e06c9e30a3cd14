package testbed

import (
	"testing"
)

func TestNBClusterFailover(t *testing.T) {
	c := StartNBCluster(t, 3)
	leader := c.WaitLeader()
	c.Nbctl("ls-add", "sw0")
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if leader.Alive() {
		t.Fatalf("%s still alive after Kill", leader.Name)
	}
	next := c.WaitLeader()
	if next == leader {
		t.Fatalf("leader still %s after it was killed", leader.Name)
	}
	c.Nbctl("ls-add", "sw1")
	if got := c.Nbctl("--bare", "--columns=name", "find", "Logical_Switch", "name=sw0"); got != "sw0" {
		t.Errorf("sw0 after failover to %s: %q", next.Name, got)
	}
	if c.Member(next.Remote) != next || c.Member("tcp:127.0.0.1:1") != nil {
		t.Errorf("Member(remote) does not find the member by its remote")
	}
}
