//go:build linux

package hostnet

import (
	"fmt"
	"log/slog"
	"runtime"

	"github.com/google/nftables"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// namespace runs functions in one network namespace: the one at a path
// given to Open, or the caller's own when the path is empty.
type namespace struct {
	path   string
	handle netns.NsHandle // netns.None() for the caller's namespace
}

// openNamespace opens the namespace at path ("" = the caller's own).
func openNamespace(path string) (*namespace, error) {
	if path == "" {
		return &namespace{handle: netns.None()}, nil
	}
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	return &namespace{path: path, handle: h}, nil
}

// do runs fn with the calling goroutine locked to an OS thread that has
// entered the namespace, so that netlink sockets opened and processes
// started by fn (iptables) live in it; the thread returns to its
// original namespace afterwards. If that return fails the goroutine stays
// locked, so the runtime discards the thread when the goroutine ends
// instead of reusing it in the wrong namespace.
func (n *namespace) do(fn func() error) error {
	if !n.handle.IsOpen() {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(n.handle); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", n.path, err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			slog.Error("hostnet: cannot return to the original network namespace; thread discarded", "netns", n.path, "err", err)
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// netlink opens a netlink handle in the namespace.
func (n *namespace) netlink() (*netlink.Handle, error) {
	var h *netlink.Handle
	var err error
	if n.handle.IsOpen() {
		h, err = netlink.NewHandleAt(n.handle)
	} else {
		h, err = netlink.NewHandle()
	}
	if err != nil {
		return nil, fmt.Errorf("hostnet: open netlink: %w", err)
	}
	return h, nil
}

// nftables opens an nftables connection whose netlink sockets (one per
// operation) are opened in the namespace.
func (n *namespace) nftables() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if n.handle.IsOpen() {
		opts = append(opts, nftables.WithNetNSFd(int(n.handle)))
	}
	return nftables.New(opts...)
}

// close releases the namespace handle.
func (n *namespace) close() error {
	if !n.handle.IsOpen() {
		return nil
	}
	if err := n.handle.Close(); err != nil {
		return fmt.Errorf("close network namespace %s: %w", n.path, err)
	}
	return nil
}
