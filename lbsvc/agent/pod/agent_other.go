//go:build !linux

package pod

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"

	"github.com/ovnedge/ovnedge/lbsvc/agent"
)

// apply needs Linux (netlink, nftables); elsewhere Config and Status build
// and Apply and Run report errors.ErrUnsupported.
func apply(context.Context, agent.Config) (Status, error) {
	return Status{}, fmt.Errorf("agent: programming the pod needs Linux, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// forget needs Linux (netlink).
func forget(agent.Config, netip.Prefix) error {
	return fmt.Errorf("agent: needs Linux, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
