//go:build !nomanifests

package daemon

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/ovnedge/ovnedge/manifests"
)

// The manifests mode links client-go's fake clientsets (about a quarter of
// the binary); the image is built without it (-tags nomanifests,
// scripts/image.sh), so that every pod maps less.
func init() { connectManifests = connectDir }

// connectDir returns clients serving the manifests directory dir, loaded
// once.
func connectDir(dir string, log *slog.Logger) (*Clients, error) {
	src := manifests.NewSource(dir, log)
	if err := src.Reload(); err != nil {
		if _, statErr := os.Stat(dir); statErr != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		log.Warn("some manifests could not be loaded; the rest are used", "err", err)
	}
	return &Clients{Typed: src.Clientset, Dynamic: src.Dynamic, FromManifests: true, Source: src}, nil
}
