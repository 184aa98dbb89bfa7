package memtune

import (
	"os"
	"strings"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	const exe = "/usr/local/bin/tranche"
	maps := strings.Join([]string{
		"00400000-025ed000 r-xp 00000000 fd:01 123 /usr/local/bin/tranche",
		"Rss:               28832 kB",
		"Anonymous:             0 kB",
		"VmFlags: rd ex mr mw me",
		"025ed000-04e55000 r--p 021ed000 fd:01 123 /usr/local/bin/tranche",
		"Anonymous:             0 kB",
		"04e55000-04e56000 r--p 04a55000 fd:01 123 /usr/local/bin/tranche",
		"Anonymous:             4 kB",
		"04e56000-04f14000 rw-p 04a56000 fd:01 123 /usr/local/bin/tranche",
		"Anonymous:           764 kB",
		"04f14000-06f66000 rw-p 00000000 00:00 0 ",
		"7f0000000000-7f0000001000 r--s 00000000 fd:01 9 /var/lib/tranche/etcd/member/snap/db",
		"7f0000002000-7f0000003000 r-xp 00000000 fd:01 7 /usr/lib/x86_64-linux-gnu/libc.so.6",
		"7f0000004000-7f0000005000 r--p 00000000 fd:01 8 /usr/local/bin/tranche-other",
	}, "\n")
	got, err := readOnlyMappings(strings.NewReader(maps), exe)
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x25ed000}, {0x25ed000, 0x4e55000}}
	if len(got) != len(want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d: got %#x-%#x, want %#x-%#x", i, got[i].start, got[i].end, want[i].start, want[i].end)
		}
	}
}

func TestReadOnlyMappingsBadLine(t *testing.T) {
	for name, line := range map[string]string{
		"no dash":  "00400000 r-xp 00000000 fd:01 123 /t",
		"not hex":  "0040zz00-025ed000 r-xp 00000000 fd:01 123 /t",
		"inverted": "025ed000-00400000 r-xp 00000000 fd:01 123 /t",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readOnlyMappings(strings.NewReader(line), "/t")
			if err == nil || !strings.Contains(err.Error(), "smaps line 1") {
				t.Fatalf("got error %v, want one naming maps line 1", err)
			}
		})
	}
}

// TestReleaseBinaryPagesOfSelf runs the release on the test binary itself: it must find
// the code mapping, and the process must go on running code from the released pages.
func TestReleaseBinaryPagesOfSelf(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := readOnlyMappings(f, exe)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatalf("no read-only mapping of %s found in /proc/self/smaps", exe)
	}
	if err := releaseBinaryPages(); err != nil {
		t.Fatal(err)
	}
}
