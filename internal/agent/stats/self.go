package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/agent/runc"
)

// SelfUsage is the calling process's own usage, what the node adds for its agent: the
// CPU time of its threads (not of the commands it ran: `runc run` reaps the container's
// processes, whose time the pods' cgroups already count) and its anonymous resident
// memory as working set, RSS and usage (the binary's file pages are shared with the
// other agents of the machine and not counted).
func SelfUsage() (runc.Usage, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return runc.Usage{}, fmt.Errorf("getrusage: %w", err)
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return runc.Usage{}, err
	}
	anon, err := rssAnon(status)
	if err != nil {
		return runc.Usage{}, err
	}
	return runc.Usage{CPU: cpu, MemoryUsage: anon, WorkingSet: anon, RSS: anon,
		PageFaults: uint64(ru.Minflt + ru.Majflt), MajorPageFaults: uint64(ru.Majflt)}, nil
}

// rssAnon reads RssAnon (in kB) from a /proc/PID/status file, in bytes.
func rssAnon(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "RssAnon:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/self/status RssAnon: %w", err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/self/status has no RssAnon")
}
