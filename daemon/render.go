package daemon

import (
	"context"
	"log/slog"

	"github.com/ovnedge/ovnedge/desired"
	"github.com/ovnedge/ovnedge/kubewatch"
)

// LoadSnapshot returns the objects of cfg's source (the manifests
// directory, or the API server) through the daemon's informers, once.
func LoadSnapshot(ctx context.Context, cfg *Config, log *slog.Logger) (desired.Snapshot, *Clients, error) {
	c, err := Connect(cfg, log)
	if err != nil {
		return desired.Snapshot{}, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the informers: the snapshot's objects stay
	w := kubewatch.NewWatcher(c.Typed, c.Dynamic, log, c.watchOptions(cfg)...)
	if err := w.Start(ctx); err != nil {
		return desired.Snapshot{}, nil, err
	}
	s, err := w.Snapshot()
	return s, c, err
}
