package ovsflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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

// Watch keeps an OpenFlow connection to the bridge's management socket,
// answering echo requests, and signals every successful handshake: the
// first one and each one after ovs-vswitchd restarted (the connection
// drops when it exits). It is the liveness half of an OpenFlow client,
// written here because the Go OpenFlow libraries are out of reach.
func (t *OfctlTransport) Watch(ctx context.Context, bridge string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			conn, err := (&net.Dialer{}).DialContext(ctx, "unix", t.sock(bridge))
			if err == nil {
				watchConn(ctx, conn, ch)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return ch
}

// OpenFlow 1.3 message types used by watchConn.
const (
	ofVersion13   = 4
	ofTypeHello   = 0
	ofTypeEchoReq = 2
	ofTypeEchoRep = 3
	ofHeaderLen   = 8
)

// watchConn says hello, signals up when the switch answers, and answers
// echo requests until the connection or ctx ends.
func watchConn(ctx context.Context, conn net.Conn, up chan<- struct{}) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	hello := []byte{ofVersion13, ofTypeHello, 0, ofHeaderLen, 0, 0, 0, 1}
	if _, err := conn.Write(hello); err != nil {
		return
	}
	hdr := make([]byte, ofHeaderLen)
	for {
		if _, err := io.ReadFull(conn, hdr); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(hdr[2:4]))
		if n < ofHeaderLen {
			return
		}
		body := make([]byte, n-ofHeaderLen)
		if _, err := io.ReadFull(conn, body); err != nil {
			return
		}
		switch hdr[1] {
		case ofTypeHello:
			select {
			case up <- struct{}{}:
			default: // a resync is already pending
			}
		case ofTypeEchoReq:
			reply := append([]byte{hdr[0], ofTypeEchoRep, hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], hdr[7]}, body...)
			if _, err := conn.Write(reply); err != nil {
				return
			}
		}
	}
}
