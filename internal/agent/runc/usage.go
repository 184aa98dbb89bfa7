package runc

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"
)

// Usage is what a cgroup has used, the counters kubelet's resource statistics are made
// of (cAdvisor reads the same files).
type Usage struct {
	// CPU is the cumulative CPU time of the cgroup's processes, those that ended and
	// those of child cgroups that were removed included (v1 cpuacct.usage, v2 cpu.stat
	// usage_usec).
	CPU time.Duration
	// MemoryUsage is the memory charged to the cgroup, page cache included (v1
	// memory.usage_in_bytes, v2 memory.current).
	MemoryUsage uint64
	// WorkingSet is MemoryUsage less the inactive file cache, which the kernel reclaims
	// first (0 when that is more than the usage): what kubelet, cAdvisor and the
	// eviction manager call the working set, and what kubectl top shows.
	WorkingSet uint64
	// RSS is the anonymous memory (v1 total_rss, v2 anon).
	RSS uint64
	// PageFaults and MajorPageFaults count the cgroup's page faults, its children's
	// included (v1 total_pgfault and total_pgmajfault, v2 pgfault and pgmajfault).
	PageFaults, MajorPageFaults uint64
	// MemoryLimit is the memory limit in bytes, 0 when there is none.
	MemoryLimit uint64
}

// UsageReader reads the Usage of cgroups. It finds where the cgroup file systems are
// mounted once, so that reading many cgroups (every container of a node, every few
// seconds) costs a few small file reads each.
type UsageReader struct {
	unified bool
	// root is the unified hierarchy's mount (v2); cpuacct and memory are the v1
	// hierarchies that have those controllers.
	root, cpuacct, memory string
}

// NewUsageReader finds the cgroup hierarchies of the host (cgroup v2, or v1 with the
// cpuacct and memory controllers).
func NewUsageReader() (*UsageReader, error) {
	hs, unified, err := hierarchies()
	if err != nil {
		return nil, err
	}
	if unified {
		return &UsageReader{unified: true, root: cgroupRoot}, nil
	}
	r := &UsageReader{}
	for _, h := range hs {
		if h.v2 {
			continue
		}
		if h.has("cpuacct") && r.cpuacct == "" {
			r.cpuacct = h.mount
		}
		if h.has("memory") && r.memory == "" {
			r.memory = h.mount
		}
	}
	if r.cpuacct == "" || r.memory == "" {
		return nil, fmt.Errorf("cgroup v1 without the cpuacct and memory controllers mounted: no resource usage to read")
	}
	return r, nil
}

// Read returns the usage of the cgroup at path (for instance /tranche/<node>/pod<uid>).
// The error wraps fs.ErrNotExist when the cgroup is gone, as it is once its container
// was removed.
func (r *UsageReader) Read(path string) (Usage, error) {
	if err := checkPath(path); err != nil {
		return Usage{}, err
	}
	var u Usage
	var err error
	if r.unified {
		err = usageV2(&u, filepath.Join(r.root, path))
	} else {
		err = usageV1(&u, filepath.Join(r.cpuacct, path), filepath.Join(r.memory, path))
	}
	if err != nil {
		return Usage{}, fmt.Errorf("usage of cgroup %s: %w", path, err)
	}
	return u, nil
}

func usageV1(u *Usage, cpuacct, memory string) error {
	ns, err := readUint(filepath.Join(cpuacct, "cpuacct.usage"))
	if err != nil {
		return err
	}
	u.CPU = time.Duration(ns)
	if u.MemoryUsage, err = readUint(filepath.Join(memory, "memory.usage_in_bytes")); err != nil {
		return err
	}
	if u.MemoryLimit, err = readUint(filepath.Join(memory, "memory.limit_in_bytes")); err != nil {
		return err
	}
	if u.MemoryLimit >= math.MaxInt64/4096*4096 {
		u.MemoryLimit = 0 // the kernel's "unlimited"
	}
	stat, err := readKeyValues(filepath.Join(memory, "memory.stat"))
	if err != nil {
		return err
	}
	// The total_ keys count the cgroup and its descendants, as usage_in_bytes does.
	u.WorkingSet = workingSet(u.MemoryUsage, stat["total_inactive_file"])
	u.RSS = stat["total_rss"]
	u.PageFaults, u.MajorPageFaults = stat["total_pgfault"], stat["total_pgmajfault"]
	return nil
}

func usageV2(u *Usage, dir string) error {
	cpu, err := readKeyValues(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return err
	}
	u.CPU = time.Duration(cpu["usage_usec"]) * time.Microsecond
	if u.MemoryUsage, err = readUint(filepath.Join(dir, "memory.current")); err != nil {
		return err
	}
	if v, err := readString(filepath.Join(dir, "memory.max")); err != nil {
		return err
	} else if v != "max" {
		if u.MemoryLimit, err = strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, "memory.max"), err)
		}
	}
	stat, err := readKeyValues(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return err
	}
	u.WorkingSet = workingSet(u.MemoryUsage, stat["inactive_file"])
	u.RSS = stat["anon"]
	u.PageFaults, u.MajorPageFaults = stat["pgfault"], stat["pgmajfault"]
	return nil
}

// workingSet is usage less the inactive file cache, never below zero (the counters are
// read one after the other, and the cache may have grown in between).
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile >= usage {
		return 0
	}
	return usage - inactiveFile
}
