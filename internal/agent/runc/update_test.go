package runc

import (
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// UpdateCgroup rewrites an existing cgroup's cpu and memory as an in-place resize does,
// unlimited included, and refuses a cgroup that does not exist.
func TestUpdateCgroup(t *testing.T) {
	requireRoot(t)
	base := "/" + unique()
	t.Cleanup(func() { RemovePod(base) })
	path := base + "/pod/ctr"
	if err := UpdateCgroup(path, &specs.LinuxResources{}); err == nil {
		t.Fatal("UpdateCgroup of a missing cgroup: no error")
	}
	if err := EnsurePod(path, nil); err != nil {
		t.Fatal(err)
	}
	hs, unified, err := hierarchies()
	if err != nil {
		t.Fatal(err)
	}
	read := func(ctl, v1, v2 string) string {
		t.Helper()
		dir, err := controllerDir(hs, unified, ctl, path)
		if err != nil {
			t.Fatal(err)
		}
		name := v1
		if unified {
			name = v2
		}
		s, err := readString(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name          string
		quota, memory int64
		wantV1        [2]string // cpu.cfs_quota_us, memory.limit_in_bytes
		wantV2        [2]string // cpu.max, memory.max
	}{
		{name: "limits", quota: 3500, memory: 50 << 20, wantV1: [2]string{"3500", "52428800"}, wantV2: [2]string{"3500 100000", "52428800"}},
		{name: "larger", quota: 20000, memory: 96 << 20, wantV1: [2]string{"20000", "100663296"}, wantV2: [2]string{"20000 100000", "100663296"}},
		{name: "unlimited", quota: -1, memory: -1, wantV1: [2]string{"-1", "9223372036854771712"}, wantV2: [2]string{"max 100000", "max"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shares, period, quota, memory := uint64(25), uint64(100000), tc.quota, tc.memory
			res := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &shares, Period: &period, Quota: &quota}, Memory: &specs.LinuxMemory{Limit: &memory}}
			if err := UpdateCgroup(path, res); err != nil {
				t.Fatal(err)
			}
			want := tc.wantV1
			if unified {
				want = tc.wantV2
			}
			got := [2]string{read("cpu", "cpu.cfs_quota_us", "cpu.max"), read("memory", "memory.limit_in_bytes", "memory.max")}
			if got != want {
				t.Errorf("cgroup files = %q, want %q", got, want)
			}
			if w := read("cpu", "cpu.shares", "cpu.weight"); w == "" || w == "0" {
				t.Errorf("cpu shares/weight = %q", w)
			}
		})
	}
}
