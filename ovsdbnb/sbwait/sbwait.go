// Package sbwait tells when an OVN chassis has applied the Northbound
// database up to a given point: ovn-northd copies NB_Global.nb_cfg into
// the Southbound, and each ovn-controller writes it into its
// Chassis_Private row once its flows are installed (the mechanism of
// `ovn-nbctl --wait=hv`, but for one chassis, so a dead chassis elsewhere
// does not hold anyone up).
//
// The daemon uses it for make-before-break: the new egress node's SNAT
// must be installed on that node before another node starts rerouting
// traffic to it, or the first packets take the node-wide SNAT and
// conntrack keeps that source for the whole connection.
package sbwait

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// chassisPrivate is the Southbound Chassis_Private row (every column:
// the cache drops an update naming a column the model lacks, and
// ovn-controller changes nb_cfg_timestamp with nb_cfg).
type chassisPrivate struct {
	UUID           string            `ovsdb:"_uuid"`
	Name           string            `ovsdb:"name"`
	Chassis        *string           `ovsdb:"chassis"`
	NbCfg          int               `ovsdb:"nb_cfg"`
	NbCfgTimestamp int               `ovsdb:"nb_cfg_timestamp"`
	ExternalIDs    map[string]string `ovsdb:"external_ids"`
}

// Waiter watches the Southbound's Chassis_Private table.
type Waiter struct {
	sb client.Client
}

// Dial connects to the Southbound at endpoints (unix:, tcp:, ssl:, with
// tlsConfig for ssl:) and monitors Chassis_Private.
func Dial(ctx context.Context, endpoints []string, tlsConfig *tls.Config) (*Waiter, error) {
	sb, err := ovsdbnb.DialSouthbound(ctx, endpoints, tlsConfig, map[string]model.Model{"Chassis_Private": &chassisPrivate{}})
	if err != nil {
		return nil, fmt.Errorf("sbwait: %w", err)
	}
	return &Waiter{sb: sb}, nil
}

// Applied reports the nb_cfg each chassis has applied, by chassis name.
func (w *Waiter) Applied(ctx context.Context) (map[string]int, error) {
	var rows []chassisPrivate
	if err := w.sb.List(ctx, &rows); err != nil {
		return nil, fmt.Errorf("sbwait: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Name] = r.NbCfg
	}
	return out, nil
}

// Wait returns once every chassis in chassis has applied nb_cfg cfg, or
// an error naming the ones that had not when ctx ends.
func (w *Waiter) Wait(ctx context.Context, cfg int, chassis ...string) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		applied, err := w.Applied(ctx)
		if err != nil {
			return err
		}
		var behind []string
		for _, c := range chassis {
			if applied[c] < cfg {
				behind = append(behind, fmt.Sprintf("%s (at %d)", c, applied[c]))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sbwait: nb_cfg %d not applied by %s: %w", cfg, strings.Join(behind, ", "), ctx.Err())
		case <-t.C:
		}
	}
}

// Confirm waits, up to bound, until every chassis in chassis has applied
// the NB as written now: next marks that point (ovsdbnb.Client.NextCfg
// bumps NB_Global.nb_cfg and returns it). It returns how long it took,
// and Wait's error when a chassis had not in time.
func (w *Waiter) Confirm(ctx context.Context, next func(context.Context) (int, error), bound time.Duration, chassis ...string) (time.Duration, error) {
	begin := time.Now()
	cfg, err := next(ctx)
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, bound)
		err = w.Wait(wctx, cfg, chassis...)
		cancel()
	}
	return time.Since(begin), err
}

// Close disconnects.
func (w *Waiter) Close() { w.sb.Close() }
