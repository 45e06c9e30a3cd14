package testbed

import (
	"os/exec"
	"testing"
)

// TestMemoryCgroup: a process that stays under the group's limit runs
// and is counted, one that allocates past it is OOM-killed by the kernel
// and counted as such.
func TestMemoryCgroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block string // dd's buffer: what the process allocates and fills
		oom   bool
	}{
		{"under the limit", "8M", false},
		{"past the limit", "200M", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := NewMemoryCgroup(t, 64<<20)
			argv := cg.Command("dd", "if=/dev/zero", "of=/dev/null", "bs="+tc.block, "count=1")
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			if (err != nil) != tc.oom {
				t.Fatalf("dd bs=%s in a 64 MiB group: %v\n%s", tc.block, err, out)
			}
			s, err := cg.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if s.Limit != 64<<20 || (s.OOMKills > 0) != tc.oom || s.MaxUsage < 4<<20 {
				t.Errorf("stats %+v: want limit 64 MiB, OOM kills only past the limit, some usage", s)
			}
		})
	}
}
