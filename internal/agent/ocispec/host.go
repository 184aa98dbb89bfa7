package ocispec

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// HostCapabilities reads the calling process's capability bounding set (CapBnd in
// /proc/self/status) as names, for Input.HostCapabilities: a container can hold no
// capability its runtime lacks, and runc refuses a spec that asks for one.
func HostCapabilities() ([]string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("CapBnd %q: %w", v, err)
		}
		return capNames(mask), nil
	}
	return nil, fmt.Errorf("no CapBnd line in /proc/self/status")
}

// capNames lists the capabilities whose bits are set in mask.
func capNames(mask uint64) []string {
	var out []string
	for bit, name := range allCaps {
		if mask&(1<<uint(bit)) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// MinOOMScoreAdj is Input.MinOOMScoreAdj for containers of the calling process: nil
// when its bounding set holds CAP_SYS_RESOURCE (kubelet's scores can all be set),
// else its own oom_score_adj, the lowest it can be sure to set without that capability
// (a process may always keep or raise its score; the kernel's hidden minimum is at
// most the current score).
func MinOOMScoreAdj(hostCaps []string) (*int, error) {
	if slices.Contains(hostCaps, "CAP_SYS_RESOURCE") {
		return nil, nil
	}
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return nil, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("/proc/self/oom_score_adj %q: %w", b, err)
	}
	return &v, nil
}
