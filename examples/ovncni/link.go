package main

import (
	"errors"
	"fmt"
	"net"
	"unsafe"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// plugVeth makes the veth pair from inside the pod's namespace: the pod
// end args.IfName with mac, mtu, the result's addresses and routes and
// no TX checksum offload; the host end, named host, in this namespace
// and up (ip.SetupVethWithName sets it up). It records both ends in
// result, the addresses on the pod end.
func plugVeth(args *skel.CmdArgs, mtu int, host string, mac net.HardwareAddr, result *current.Result) error {
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return fmt.Errorf("ovncni: open netns %s: %w", args.Netns, err)
	}
	defer netns.Close()
	// A host end left behind by an earlier ADD of this container would
	// block the name.
	if err := ip.DelLinkByName(host); err != nil && !errors.Is(err, ip.ErrLinkNotFound) {
		return fmt.Errorf("ovncni: remove stale %s: %w", host, err)
	}
	return netns.Do(func(hostNS ns.NetNS) error {
		hostIf, podIf, err := ip.SetupVethWithName(args.IfName, host, mtu, mac.String(), hostNS)
		if err != nil {
			return fmt.Errorf("ovncni: veth %s (pod %s): %w", host, args.IfName, err)
		}
		result.Interfaces = []*current.Interface{
			{Name: hostIf.Name, Mac: hostIf.HardwareAddr.String()},
			{Name: podIf.Name, Mac: podIf.HardwareAddr.String(), Sandbox: args.Netns},
		}
		for _, ipc := range result.IPs {
			ipc.Interface = current.Int(1)
		}
		if err := ipam.ConfigureIface(args.IfName, result); err != nil {
			return fmt.Errorf("ovncni: configure %s: %w", args.IfName, err)
		}
		return disableTxChecksum(args.IfName)
	})
}

// unplugVeth deletes the pod's interface, which takes the host end with
// it, and the host end should it be left (no netns given). A netns or
// link already gone is no error.
func unplugVeth(args *skel.CmdArgs, host string) error {
	if args.Netns != "" {
		err := ns.WithNetNSPath(args.Netns, func(ns.NetNS) error { return ip.DelLinkByName(args.IfName) })
		var gone ns.NSPathNotExistErr
		var notNS ns.NSPathNotNSErr
		if err != nil && !errors.Is(err, ip.ErrLinkNotFound) && !errors.As(err, &gone) && !errors.As(err, &notNS) {
			return fmt.Errorf("ovncni: delete %s in %s: %w", args.IfName, args.Netns, err)
		}
	}
	if err := ip.DelLinkByName(host); err != nil && !errors.Is(err, ip.ErrLinkNotFound) {
		return fmt.Errorf("ovncni: delete %s: %w", host, err)
	}
	return nil
}

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd, data uint32
}

// ifreqData is struct ifreq with ifr_data set; data stays an
// unsafe.Pointer (not a uintptr) so the Go runtime keeps what it points
// to valid, as x/sys/unix's own ifreqData does.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [unsafe.Sizeof(unix.Ifreq{}) - unix.IFNAMSIZ - unsafe.Sizeof(unsafe.Pointer(nil))]byte
}

// disableTxChecksum turns TX checksum offload off on ifName (of the
// current namespace), as `ethtool -K <ifName> tx off` does, by the
// ETHTOOL_STXCSUM ioctl (the kernel turns TSO off with it). OVS's
// userspace (netdev) datapath reads a veth through an AF_PACKET socket
// and forwards the packets as read: a CHECKSUM_PARTIAL packet from the
// pod, whose TCP/UDP checksum the kernel left for an offload that never
// happens, would leave with a bad checksum and be dropped by its
// receiver. With the offload off the pod's stack computes it.
func disableTxChecksum(ifName string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ovncni: ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	value := ethtoolValue{cmd: unix.ETHTOOL_STXCSUM, data: 0}
	ifr := ifreqData{data: unsafe.Pointer(&value)}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifName)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return fmt.Errorf("ovncni: %s: ethtool tx checksum off: %w", ifName, errno)
	}
	return nil
}
