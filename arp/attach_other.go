//go:build !linux

package arp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"time"
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

// AnnouncerConfig configures an Announcer (Linux only).
type AnnouncerConfig struct {
	Interval, Duration time.Duration
	Logger             *slog.Logger
}

// Announcer needs Linux packet sockets; elsewhere Announce fails.
type Announcer struct{}

// NewAnnouncer returns an Announcer whose Announce reports
// errors.ErrUnsupported.
func NewAnnouncer(AnnouncerConfig) (*Announcer, error) { return &Announcer{}, nil }

// Announce reports errors.ErrUnsupported.
func (*Announcer) Announce(string, netip.Addr) error { return errors.ErrUnsupported }

// Withdraw does nothing.
func (*Announcer) Withdraw(string, netip.Addr) {}

// Close does nothing.
func (*Announcer) Close() {}
