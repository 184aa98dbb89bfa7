package benchcluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times (100 on Linux
// everywhere).
const clockTicks = 100

// ProcessCPU returns the CPU time (user and system) process pid has used so far, and
// that of the children it has reaped.
func ProcessCPU(pid int) (own, reaped time.Duration, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(data)
	// The fields after the command's name, which may hold spaces and ends with the last
	// ')': state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	tick := func(i int) time.Duration {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(v) * time.Second / clockTicks
	}
	return tick(11) + tick(12), tick(13) + tick(14), nil
}

// MachineCPU returns the CPU time all of the machine's CPUs have spent busy (every
// state but idle and iowait) and idle so far, from /proc/stat.
func MachineCPU() (busy, idle time.Duration, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		d := time.Duration(n) * time.Second / clockTicks
		switch i {
		case 3, 4: // idle, iowait
			idle += d
		case 8, 9: // guest and guest_nice are already counted in user and nice
		default:
			busy += d
		}
	}
	return busy, idle, nil
}
