//go:build linux

package arp

import (
	"encoding/binary"
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// batchSize is how many frames one system call reads or writes at most.
// Under load a request costs two system calls divided by the frames
// queued, instead of two; with one request at a time nothing changes.
const batchSize = 32

// frameSize is the room for one received frame; ARP and NDP frames are
// far smaller, and a longer one is cut short and fails to parse.
const frameSize = 2048

// mmsghdr is struct mmsghdr of recvmmsg(2) and sendmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// batch reads and writes frames on a packet socket with recvmmsg and
// sendmmsg, through the runtime's poller (Close unblocks it).
type batch struct {
	rc   syscall.RawConn
	addr unix.RawSockaddrLinklayer // destination template for writes

	rx    [batchSize]mmsghdr
	rxIov [batchSize]unix.Iovec
	bufs  [batchSize][frameSize]byte

	tx     [batchSize]mmsghdr
	txIov  [batchSize]unix.Iovec
	txAddr [batchSize]unix.RawSockaddrLinklayer
	queued int
}

// newBatch prepares batched I/O on c, which is bound to ifindex and the
// Ethernet protocol proto.
func newBatch(c *packet.Conn, ifindex, proto int) (*batch, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	b := &batch{rc: rc}
	var be [2]byte
	binary.BigEndian.PutUint16(be[:], uint16(proto))
	b.addr = unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Protocol: binary.NativeEndian.Uint16(be[:]),
		Ifindex: int32(ifindex), Halen: 6}
	for i := range b.rx {
		b.rxIov[i].Base = &b.bufs[i][0]
		b.rxIov[i].SetLen(frameSize)
		b.rx[i].hdr.Iov = &b.rxIov[i]
		b.rx[i].hdr.SetIovlen(1)
		b.tx[i].hdr.Name = (*byte)(unsafe.Pointer(&b.txAddr[i]))
		b.tx[i].hdr.Namelen = unix.SizeofSockaddrLinklayer
		b.tx[i].hdr.Iov = &b.txIov[i]
		b.tx[i].hdr.SetIovlen(1)
	}
	return b, nil
}

// read waits for frames and returns how many arrived; frame(i) is the
// i-th. It fails when the socket is closed or the link goes away.
func (b *batch) read() (int, error) {
	var (
		n     uintptr
		errno syscall.Errno
	)
	err := b.rc.Read(func(fd uintptr) bool {
		n, _, errno = unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.rx[0])), batchSize, unix.MSG_DONTWAIT, 0, 0)
		return errno != unix.EAGAIN
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, fmt.Errorf("recvmmsg: %w", errno)
	}
	return int(n), nil
}

// frame returns the i-th frame of the last read.
func (b *batch) frame(i int) []byte {
	return b.bufs[i][:min(int(b.rx[i].len), frameSize)]
}

// queue adds frame, to be sent to dst by flush; frame must stay unchanged
// until then. It reports false when the batch is full.
func (b *batch) queue(frame []byte, dst net.HardwareAddr) bool {
	if b.queued == batchSize || len(frame) == 0 {
		return false
	}
	i := b.queued
	b.txAddr[i] = b.addr
	copy(b.txAddr[i].Addr[:], dst)
	b.txIov[i].Base = &frame[0]
	b.txIov[i].SetLen(len(frame))
	b.queued++
	return true
}

// flush sends the queued frames and returns how many went out; on an
// error the rest are dropped. The queue is empty afterwards.
func (b *batch) flush() (int, error) {
	defer func() {
		for i := range b.queued {
			b.txIov[i].Base = nil // let the frames go
		}
		b.queued = 0
	}()
	sent := 0
	for sent < b.queued {
		var (
			n     uintptr
			errno syscall.Errno
		)
		err := b.rc.Write(func(fd uintptr) bool {
			n, _, errno = unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.tx[sent])), uintptr(b.queued-sent), unix.MSG_DONTWAIT, 0, 0)
			return errno != unix.EAGAIN
		})
		if err != nil {
			return sent, err
		}
		if errno != 0 {
			return sent, fmt.Errorf("sendmmsg: %w", errno)
		}
		sent += int(n)
	}
	return sent, nil
}
