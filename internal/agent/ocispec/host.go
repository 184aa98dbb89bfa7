package ocispec

import (
	"bufio"
	"fmt"
	"os"
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
