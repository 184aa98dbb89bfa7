package runc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Tests of the parts that need neither root nor runc.

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		name, mountinfo string
		want            []hierarchy
	}{
		{
			name: "hybrid",
			mountinfo: `25 1 0:22 / /sys rw,nosuid - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw shared:15 - cgroup cgroup rw,cpu,cpuacct
36 30 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
37 30 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
38 1 0:33 / /mnt/elsewhere rw - cgroup cgroup rw,pids
`,
			want: []hierarchy{
				{mount: "/sys/fs/cgroup/unified", v2: true},
				{mount: "/sys/fs/cgroup/systemd", controllers: []string{"name=systemd"}},
				{mount: "/sys/fs/cgroup/cpu,cpuacct", controllers: []string{"cpu", "cpuacct"}},
				{mount: "/sys/fs/cgroup/memory", controllers: []string{"memory"}},
			},
		},
		{name: "nothing", mountinfo: "25 1 0:22 / /sys rw - sysfs sysfs rw\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMountinfo(strings.NewReader(tc.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(hierarchy{})); d != "" {
				t.Errorf("hierarchies (-want +got):\n%s", d)
			}
		})
	}
}

func TestCPUWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{0: 1, 2: 1, 1024: 39, 262144: 10000, 1 << 40: 10000} {
		if got := cpuWeight(shares); got != want {
			t.Errorf("cpuWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func TestStatsOOMKilled(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    CgroupStats
		code int
		want bool
	}{
		{name: "counted", s: CgroupStats{OOMKillsKnown: true, OOMKills: 1}, code: 137, want: true},
		{name: "killed by hand, limit hit", s: CgroupStats{OOMKillsKnown: true, MemoryFailcnt: 3}, code: 137},
		{name: "old kernel, limit hit", s: CgroupStats{MemoryFailcnt: 3}, code: 137, want: true},
		{name: "old kernel, exit 1", s: CgroupStats{MemoryFailcnt: 3}, code: 1},
	} {
		if got := tc.s.OOMKilled(tc.code); got != tc.want {
			t.Errorf("%s: OOMKilled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWriteBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	spec := &specs.Spec{Version: "1.0.2", Process: &specs.Process{Args: []string{"true"}, Terminal: true}}
	for range 2 { // the second write replaces the first
		if err := WriteBundle(dir, spec); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "config.json" {
		t.Fatalf("bundle holds %v (%v), want config.json alone", entries, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got specs.Spec
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(spec, &got); d != "" {
		t.Errorf("config.json (-want +got):\n%s", d)
	}
}

func TestStartErrorFromLog(t *testing.T) {
	dir := t.TempDir()
	log := `{"level":"warning","msg":"a warning","time":"2026-01-01T00:00:00Z"}
{"level":"error","msg":"runc run failed: unable to start container process: exec: \"nope\": executable file not found in $PATH","time":"2026-01-01T00:00:00Z"}
`
	if err := os.WriteFile(filepath.Join(dir, logFile), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := startError(dir); err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("startError = %v, want runc's error", err)
	}
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte("42"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := startError(dir); err != nil {
		t.Errorf("startError with a pid file = %v, want nil", err)
	}
}
