package daemon

import (
	"slices"
	"testing"

	"github.com/ovnedge/ovnedge/internal/scale"
)

// TestSoftMemoryLimit: the runtime gets 90% of the container's limit the
// chart passes, unless GOMEMLIMIT is set; a bad value is an error.
func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, limit, gomemlimit string
		want                    int64
		ok, err                 bool
	}{
		{"no limit", "", "", 0, false, false},
		{"512Mi", "536870912", "", 483183820, true, false},
		{"GOMEMLIMIT wins", "536870912", "300MiB", 0, false, false},
		{"not bytes", "512Mi", "", 0, false, true},
		{"zero", "0", "", 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvMemoryLimit: tc.limit, "GOMEMLIMIT": tc.gomemlimit}
			got, ok, err := softMemoryLimit(func(k string) string { return env[k] })
			if got != tc.want || ok != tc.ok || (err != nil) != tc.err {
				t.Errorf("%d %v %v, want %d %v error %v", got, ok, err, tc.want, tc.ok, tc.err)
			}
		})
	}
}

// TestScaleLeaderMemoryLimit: the scale benchmark tells its leader the
// limit by the name the daemon reads.
func TestScaleLeaderMemoryLimit(t *testing.T) {
	if env := scale.LeaderEnv("536870912"); !slices.Contains(env, EnvMemoryLimit+"=536870912") {
		t.Errorf("scale.LeaderEnv: %q, no %s", env, EnvMemoryLimit)
	}
}
