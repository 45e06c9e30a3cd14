package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// vsctlTimeout bounds one ovs-vsctl run (which itself gives up after
// --timeout=30).
const vsctlTimeout = 35 * time.Second

// vsctl runs ovs-vsctl against the configured Open_vSwitch database and
// returns its trimmed stdout. go-openvswitch's ovs package cannot set
// external_ids, hence the command.
func vsctl(conf *netConf, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), vsctlTimeout)
	defer cancel()
	argv := append([]string{"--db=" + conf.OVSDB, "--timeout=30"}, args...)
	cmd := exec.CommandContext(ctx, "ovs-vsctl", argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ovncni: ovs-vsctl %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// addPort adds the host end to the bridge, bound to the logical switch
// port lsp (iface-id) as ovnkube-node does, with the sandbox recorded.
func addPort(conf *netConf, host, lsp, containerID string) error {
	_, err := vsctl(conf, "--may-exist", "add-port", conf.Bridge, host,
		"--", "set", "Interface", host, "external_ids:iface-id="+lsp, "external_ids:sandbox="+containerID)
	return err
}

// delPort removes the host end from the bridge, if it is there.
func delPort(conf *netConf, host string) error {
	_, err := vsctl(conf, "--if-exists", "del-port", conf.Bridge, host)
	return err
}

// portClaimed reports whether an interface of this node still claims the
// logical switch port lsp (a newer sandbox of the same pod).
func portClaimed(conf *netConf, lsp string) (bool, error) {
	out, err := vsctl(conf, "--bare", "--columns=name", "find", "Interface", "external_ids:iface-id="+lsp)
	return out != "", err
}
