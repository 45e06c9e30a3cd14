// Command ovnedge is the ovnedge daemon and its tools: `ovnedge daemon`
// keeps the dataplane programmed from Kubernetes (or manifest files),
// `ovnedge render` prints the desired flows and Northbound rows,
// `ovnedge sync --once` applies them once. Run `ovnedge` for the help.
// The logic lives in package daemon, where it is tested.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/ovnedge/ovnedge/daemon"
)

func main() {
	// client-go logs through klog: send it to the same structured log.
	klog.SetSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := daemon.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
