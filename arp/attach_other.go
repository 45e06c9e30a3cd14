//go:build !linux

package arp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
)

// attachment is Linux-only (packet sockets): elsewhere the pure parts of
// the package (Elect, Owned, Controller, Responder's address set) build
// and Responder.Run reports errors.ErrUnsupported.
type attachment struct{ ifi *net.Interface }

func attach(*Responder) (*attachment, error) {
	return nil, fmt.Errorf("arp: answering needs Linux packet sockets, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (a *attachment) ownedChanged(ownedSet, []netip.Addr) {}
func (a *attachment) serve(context.Context) error         { return errors.ErrUnsupported }
func (a *attachment) close()                              {}
