package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// MemoryCgroup is a memory cgroup (cgroup v1's memory controller, as the
// kubelet on these machines uses it) with a limit, as a kubelet makes one
// for a container with resources.limits.memory: what the processes
// started through Command allocate, and the page cache they read, is
// charged to it; at the limit the kernel reclaims its page cache and,
// when that is not enough, OOM-kills a process in it.
type MemoryCgroup struct {
	// Dir is the group's directory in the controller's hierarchy.
	Dir string
}

var memcgSeq atomic.Int64

// NewMemoryCgroup creates a memory cgroup limited to limit bytes under
// this process's own, removed on cleanup (cleanups run in reverse, so
// after the processes started later through Command are stopped).
func NewMemoryCgroup(t T, limit int64) *MemoryCgroup {
	t.Helper()
	parent, err := ownMemoryCgroup()
	if err != nil {
		t.Fatalf("testbed: memory cgroup: %v", err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("ovnedge-test-%d-%d", os.Getpid(), memcgSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("testbed: memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Logf("testbed: remove memory cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatalf("testbed: memory cgroup limit: %v", err)
	}
	return &MemoryCgroup{Dir: dir}
}

// Command is argv run in the group: a shell moves itself into it and
// execs argv, so the process (same PID) is charged from its first page.
func (c *MemoryCgroup) Command(argv ...string) []string {
	return append([]string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.Dir}, argv...)
}

// MemoryCgroupStats are a group's counters.
type MemoryCgroupStats struct {
	// Limit, Usage and MaxUsage (the peak since the group was made) count
	// everything charged: anonymous memory and page cache.
	Limit, Usage, MaxUsage int64
	// RSS and Cache are what Usage is now: anonymous memory, and page
	// cache (of which Mapped is mapped into the processes: the binary's
	// pages).
	RSS, Cache, Mapped int64
	// Failcnt counts the times the limit was hit (and the kernel
	// reclaimed), OOMKills the processes the kernel killed for it.
	Failcnt, OOMKills int64
}

// Stats reads the group's counters.
func (c *MemoryCgroup) Stats() (MemoryCgroupStats, error) {
	var s MemoryCgroupStats
	for file, v := range map[string]*int64{"memory.limit_in_bytes": &s.Limit, "memory.usage_in_bytes": &s.Usage,
		"memory.max_usage_in_bytes": &s.MaxUsage, "memory.failcnt": &s.Failcnt} {
		data, err := os.ReadFile(filepath.Join(c.Dir, file))
		if err != nil {
			return s, err
		}
		if *v, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil {
			return s, fmt.Errorf("%s: %w", file, err)
		}
	}
	err := readKeyed(filepath.Join(c.Dir, "memory.stat"), map[string]*int64{"rss": &s.RSS, "cache": &s.Cache, "mapped_file": &s.Mapped})
	if err == nil {
		err = readKeyed(filepath.Join(c.Dir, "memory.oom_control"), map[string]*int64{"oom_kill": &s.OOMKills})
	}
	return s, err
}

// readKeyed reads the "key value" lines of path into fields.
func readKeyed(path string, fields map[string]*int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if p := fields[k]; ok && p != nil {
			if *p, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("%s %s: %w", path, k, err)
			}
		}
	}
	return sc.Err()
}

// ownMemoryCgroup is the directory of this process's cgroup v1 memory
// group: the controller's mount point (/proc/self/mountinfo) joined with
// the group's path in the hierarchy (/proc/self/cgroup), less the mount's
// root.
func ownMemoryCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	path := ""
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && strings.Contains(","+f[1]+",", ",memory,") {
			path = f[2]
		}
	}
	if path == "" {
		return "", errors.New("no cgroup v1 memory controller in /proc/self/cgroup")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(info), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" || !strings.Contains(","+g[2]+",", ",memory,") {
			continue
		}
		root, mount := f[3], f[4]
		rel, ok := strings.CutPrefix(path, root)
		if !ok {
			continue
		}
		return filepath.Join(mount, rel), nil
	}
	return "", errors.New("the cgroup v1 memory controller is not mounted here")
}
