package reach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// DiscardPort is the TCP port of the DISCARD probe.
const DiscardPort = 9

// DialFunc opens a connection, as net.Dialer.DialContext does. A Checker
// or Client uses it for every socket (tests use it to dial from a network
// namespace; a daemon could bind a source address).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// ProbeDiscard probes addr:9 with a TCP connect bounded by timeout and
// reports whether the host is up; the error says why it is considered
// down. A refused connection means up. dial nil uses a net.Dialer.
func ProbeDiscard(ctx context.Context, dial DialFunc, addr netip.Addr, timeout time.Duration) (bool, error) {
	return probeTCP(ctx, dial, netip.AddrPortFrom(addr, DiscardPort), timeout)
}

func probeTCP(ctx context.Context, dial DialFunc, target netip.AddrPort, timeout time.Duration) (bool, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, "tcp", target.String())
	if err == nil {
		conn.Close()
		return true, nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true, nil
	}
	return false, fmt.Errorf("probe %s: %w", target, err)
}

// hostPort is addr:port for gRPC targets.
func hostPort(addr netip.Addr, port int) string {
	return net.JoinHostPort(addr.String(), strconv.Itoa(port))
}
