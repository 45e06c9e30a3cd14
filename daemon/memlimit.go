package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
)

// EnvMemoryLimit is the environment variable the chart sets to the
// container's memory limit in bytes (the Downward API's limits.memory).
const EnvMemoryLimit = "OVNEDGE_MEMORY_LIMIT"

// MemoryLimitShare is the share of the container's memory limit the Go
// runtime gets as its soft limit: the rest is for what the runtime does
// not count and the kernel charges to the container (the binary's
// pages), so the runtime collects harder before the kernel kills. At
// 150,000 pods, a leader under GOMEMLIMIT=512MiB had 557 MiB resident.
const MemoryLimitShare = 0.9

// softMemoryLimit is the Go runtime's soft memory limit for the container
// limit in env (EnvMemoryLimit), false when none applies: no limit, or
// GOMEMLIMIT set, which wins.
func softMemoryLimit(getenv func(string) string) (int64, bool, error) {
	v := getenv(EnvMemoryLimit)
	if v == "" || getenv("GOMEMLIMIT") != "" {
		return 0, false, nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return 0, false, fmt.Errorf("%s=%q: not a number of bytes", EnvMemoryLimit, v)
	}
	return int64(float64(limit) * MemoryLimitShare), true, nil
}

// applyMemoryLimit sets the runtime's soft memory limit from the
// container's (softMemoryLimit), logging what it did.
func applyMemoryLimit(log *slog.Logger) {
	soft, ok, err := softMemoryLimit(os.Getenv)
	if err != nil {
		log.Warn("memory limit ignored", "err", err)
		return
	}
	if ok {
		debug.SetMemoryLimit(soft)
		log.Info("Go memory limit set", "limitBytes", soft, "share", MemoryLimitShare, "of", EnvMemoryLimit)
	}
}
