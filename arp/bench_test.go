package arp

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
)

// benchClientEnv, when set to "<dev> <requests> <window>", makes the test
// binary the client of BenchmarkReplyThroughput (see benchClient) instead
// of running tests.
const benchClientEnv = "ARP_BENCH_CLIENT"

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchClientEnv); spec != "" {
		if err := benchClient(spec, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "arp bench client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchClientIP is the sender address of the benchmark's requests.
var benchClientIP = netip.MustParseAddr("192.0.2.1")

// readAnswer reads from c until an ARP reply to mac arrives, and reports
// false on a read error (the deadline).
func readAnswer(c *packet.Conn, mac net.HardwareAddr, buf []byte) bool {
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			return false
		}
		if rep, ok := parseReply(buf[:n]); ok && bytes.Equal(rep.TargetHardwareAddr, mac) {
			return true
		}
	}
}

// benchClient sends ARP requests for vip4 on the link named in spec
// ("<dev> <requests> <window>"), keeping up to window of them
// outstanding (and batching, as the responder does: the client must not
// be the bottleneck), and writes to out the number of replies and the
// nanoseconds from the first request to the last reply.
func benchClient(spec string, out io.Writer) error {
	var (
		dev              string
		requests, window int
	)
	if _, err := fmt.Sscan(spec, &dev, &requests, &window); err != nil || requests < 1 || window < 1 {
		return fmt.Errorf("spec %q, want <dev> <requests> <window>: %v", spec, err)
	}
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return err
	}
	c, err := packet.Listen(ifi, packet.Raw, etherTypeARP, nil)
	if err != nil {
		return fmt.Errorf("open ARP socket on %s: %w", dev, err)
	}
	defer c.Close()
	if err := ignoreOutgoing(c); err != nil {
		return err
	}
	req, err := requestFrame(arp.OperationRequest, ifi.HardwareAddr, benchClientIP, vip4)
	if err != nil {
		return err
	}
	b, err := newBatch(c, ifi.Index, etherTypeARP)
	if err != nil {
		return err
	}
	sent, replies := 0, 0
	var last time.Time
	start := time.Now()
	for replies < requests {
		for sent < requests && sent-replies < window && b.queue(req, ethernet.Broadcast) {
			sent++
		}
		if _, err := b.flush(); err != nil {
			return fmt.Errorf("send requests: %w", err)
		}
		// Idle for a second: every reply that will come has come.
		if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			return err
		}
		n, err := b.read()
		if err != nil {
			break
		}
		for i := range n {
			if rep, ok := parseReply(b.frame(i)); ok && bytes.Equal(rep.TargetHardwareAddr, ifi.HardwareAddr) {
				replies++
				last = time.Now()
			}
		}
	}
	_, err = fmt.Fprintln(out, replies, last.Sub(start).Nanoseconds())
	return err
}

// BenchmarkReplyLatency measures the round trip of one ARP request on a
// veth: the client sends, the responder in the other namespace answers,
// the client reads the reply; one request at a time.
func BenchmarkReplyLatency(b *testing.B) {
	p := newPair(b, Config{Poll: time.Second})
	if err := p.r.Add(vip4); err != nil {
		b.Fatal(err)
	}
	// The client reads only what it receives, as the responder does.
	if err := ignoreOutgoing(p.arpc); err != nil {
		b.Fatal(err)
	}
	req := request(b, arp.OperationRequest, p.clientIfi.HardwareAddr, benchClientIP, vip4)
	to := &packet.Addr{HardwareAddr: ethernet.Broadcast}
	buf := make([]byte, 2048)
	for b.Loop() {
		if _, err := p.arpc.WriteTo(req, to); err != nil {
			b.Fatal(err)
		}
		if err := p.arpc.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			b.Fatal(err)
		}
		if !readAnswer(p.arpc, p.clientIfi.HardwareAddr, buf) {
			b.Fatal("no reply within 1s")
		}
	}
}

// BenchmarkReplyThroughput measures sustained requests per second on a
// veth. The client is this test binary run again inside the client's
// namespace (benchClient), keeping 32 requests outstanding, so the CPU
// time of this process is the responder's alone: responder-cpu-ns/op, and
// requests/cpu-s what one core of the responder sustains whatever else
// shares the machine. requests/s is replies over wall time, lost/op the
// share of requests never answered.
func BenchmarkReplyThroughput(b *testing.B) {
	const window = 32
	p := newLink(b, Config{Poll: time.Second})
	if err := p.r.Add(vip4); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", p.client.Name, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=eth0 %d %d", benchClientEnv, b.N, window))
	cmd.Stderr = os.Stderr
	cpu := cpuTime(b)
	b.ResetTimer()
	out, err := cmd.Output()
	b.StopTimer()
	own := cpuTime(b) - cpu
	if err != nil {
		b.Fatalf("bench client: %v", err)
	}
	var replies, nanos int
	if _, err := fmt.Sscan(string(out), &replies, &nanos); err != nil || nanos <= 0 {
		b.Fatalf("bench client printed %q: %v", out, err)
	}
	client := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	b.ReportMetric(float64(replies)/time.Duration(nanos).Seconds(), "requests/s")
	b.ReportMetric(float64(b.N-replies)/float64(b.N), "lost/op")
	b.ReportMetric(float64(own)/float64(b.N), "responder-cpu-ns/op")
	b.ReportMetric(float64(b.N)/own.Seconds(), "requests/cpu-s")
	b.ReportMetric(float64(client)/float64(b.N), "client-cpu-ns/op")
}

// BenchmarkARPReply measures the responder's own work per request, without
// sockets: parsing the request and building the reply.
func BenchmarkARPReply(b *testing.B) {
	req, err := marshalARP(mustPacket(b, arp.OperationRequest, theirIP, vip4), ethernet.Broadcast, theirMAC, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	owns := ownsOnly(vip4)
	b.ReportAllocs()
	for b.Loop() {
		if v, _, _, _ := arpReply(req, ourMAC, owns); v != answer {
			b.Fatal("no answer")
		}
	}
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
