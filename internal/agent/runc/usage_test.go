package runc

import (
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestUsageRead reads cgroup files copied from a v1 (hybrid) and a v2 host, laid out
// below testdata/usage as they are below /sys/fs/cgroup.
func TestUsageRead(t *testing.T) {
	v1 := &UsageReader{cpuacct: "testdata/usage/v1/cpuacct", memory: "testdata/usage/v1/memory"}
	v2 := &UsageReader{unified: true, root: "testdata/usage/v2"}
	for _, tc := range []struct {
		name   string
		reader *UsageReader
		path   string
		want   Usage
	}{
		{
			name: "v1", reader: v1, path: "/tranche/tr-n1/pod1234/c1",
			// 50 MiB charged, 12 MiB of it inactive file cache; no limit.
			want: Usage{CPU: 1234567890 * time.Nanosecond, MemoryUsage: 50 << 20, WorkingSet: 38 << 20, RSS: 8 << 20,
				PageFaults: 3000, MajorPageFaults: 4},
		},
		{
			name: "v1 cache above usage", reader: v1, path: "/tranche/tr-n1/podcache",
			want: Usage{CPU: 5, MemoryUsage: 4096, WorkingSet: 0, PageFaults: 1, MemoryLimit: 1 << 20},
		},
		{
			name: "v2", reader: v2, path: "/tranche/tr-n1/pod1234/c1",
			// 32 MiB charged, 20 MiB of it inactive file cache; 64 MiB limit.
			want: Usage{CPU: 2500 * time.Millisecond, MemoryUsage: 32 << 20, WorkingSet: 12 << 20, RSS: 6 << 20,
				PageFaults: 5000, MajorPageFaults: 7, MemoryLimit: 64 << 20},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.reader.Read(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsageReadErrors(t *testing.T) {
	v1 := &UsageReader{cpuacct: "testdata/usage/v1/cpuacct", memory: "testdata/usage/v1/memory"}
	v2 := &UsageReader{unified: true, root: "testdata/usage/v2"}
	for _, r := range []*UsageReader{v1, v2} {
		if _, err := r.Read("/tranche/tr-n1/pod1234/gone"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a removed cgroup: %v, want an error wrapping fs.ErrNotExist", err)
		}
		for _, bad := range []string{"", "/", "relative/path", "/tranche/../etc"} {
			if _, err := r.Read(bad); err == nil {
				t.Errorf("Read(%q) read something; want the path refused", bad)
			}
		}
	}
}

// BenchmarkUsageRead is the cost of reading one cgroup, what a node's scrape pays for
// each container and pod.
func BenchmarkUsageRead(b *testing.B) {
	for _, tc := range []struct {
		name string
		r    *UsageReader
	}{
		{"v1", &UsageReader{cpuacct: "testdata/usage/v1/cpuacct", memory: "testdata/usage/v1/memory"}},
		{"v2", &UsageReader{unified: true, root: "testdata/usage/v2"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tc.r.Read("/tranche/tr-n1/pod1234/c1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
