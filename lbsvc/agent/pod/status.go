package pod

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/ovnedge/ovnedge/lbsvc/agent"
)

// ErrGatewayUnreachable is wrapped by Apply's error when the gateway did
// not answer ARP in the configured attempts. Everything else is
// programmed; Status.Gateway says what was tried.
var ErrGatewayUnreachable = errors.New("gateway unreachable")

// GatewayStatus is the outcome of the gateway ARP check.
type GatewayStatus struct {
	Addr netip.Addr
	// Checked is false for an IPv6 gateway, which is not checked.
	Checked bool
	// Reachable is true when the gateway answered; MAC is its address.
	Reachable bool
	MAC       net.HardwareAddr
	// Attempts is the number of ARP requests sent.
	Attempts int
	// Err is the last attempt's error when the gateway did not answer.
	Err string
}

// Status is what one Apply found and did.
type Status struct {
	// Address is net1's LoadBalancer address.
	Address netip.Prefix
	// AddressAdded is true when the address was not there yet.
	AddressAdded bool
	// RulesAdded and RulesRemoved count policy rules and nftables rules
	// changed: zero when everything was already as configured.
	RulesAdded, RulesRemoved int
	// PodGateway is the next hop to the ClusterIP.
	PodGateway netip.Addr
	Gateway    GatewayStatus
}

// Changed reports whether Apply changed anything but routes (which it
// replaces every time).
func (s Status) Changed() bool { return s.AddressAdded || s.RulesAdded+s.RulesRemoved > 0 }

// String is a one-line summary for logs and the pod's status.
func (s Status) String() string {
	gw := "not checked (IPv6)"
	switch {
	case s.Gateway.Reachable:
		gw = fmt.Sprintf("%s is at %s (attempt %d)", s.Gateway.Addr, s.Gateway.MAC, s.Gateway.Attempts)
	case s.Gateway.Checked:
		gw = fmt.Sprintf("%s did not answer %d ARP requests: %s", s.Gateway.Addr, s.Gateway.Attempts, s.Gateway.Err)
	}
	return fmt.Sprintf("address %s, rules +%d -%d, pod gateway %s, gateway %s",
		s.Address, s.RulesAdded, s.RulesRemoved, s.PodGateway, gw)
}

// Apply programs cfg in the calling thread's network namespace (see the
// package documentation) and checks the gateway. It is idempotent. On a
// silent gateway it returns the complete Status and an error wrapping
// ErrGatewayUnreachable; any other error means a step failed, and the
// steps before it stay programmed.
func Apply(ctx context.Context, cfg agent.Config) (Status, error) {
	cfg, err := cfg.Complete()
	if err != nil {
		return Status{}, err
	}
	return apply(ctx, cfg)
}

// Run applies cfg at once and every cfg.Resync until ctx ends, logging
// each status; it returns nil when ctx ends. A silent gateway is logged
// and tried again at the next resync, and so is an annotations file that
// lacks the address yet (ErrNotAttached; the file is read again each
// time); any other failure is returned.
func Run(ctx context.Context, cfg agent.Config) error {
	base := cfg
	cfg, err := cfg.Complete()
	if err != nil && !errors.Is(err, agent.ErrNotAttached) {
		return err
	}
	log := cfg.Logger.With("cluster_ip", cfg.ClusterIP)
	t := time.NewTicker(cfg.Resync)
	defer t.Stop()
	var applied netip.Prefix // the address of the last pass that applied
	for {
		var st Status
		if cfg, err = base.Complete(); err == nil {
			st, err = apply(ctx, cfg)
			if err == nil || errors.Is(err, ErrGatewayUnreachable) {
				if applied.IsValid() && applied != cfg.LBIP {
					log.Info("lbsvc-agent: the pod's address changed; the old one is removed", "old", applied, "new", cfg.LBIP)
					if ferr := forget(cfg, applied); ferr != nil {
						log.Warn("lbsvc-agent: old address left behind", "err", ferr)
					}
				}
				applied = cfg.LBIP
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, agent.ErrNotAttached):
			log.Warn("lbsvc-agent: waiting for the pod's address annotations", "err", err)
		case errors.Is(err, ErrGatewayUnreachable):
			log.Warn("lbsvc-agent: applied, but the gateway does not answer", "status", st.String())
		case err != nil:
			return err
		case st.Changed():
			log.Info("lbsvc-agent: applied", "status", st.String())
		default:
			log.Debug("lbsvc-agent: in sync", "status", st.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
