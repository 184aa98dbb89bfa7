package volumes

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 123_000_000, time.UTC)

// readVolume returns what a container sees in dir: every user-visible
// file (through the symlinks) with its content and mode.
func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(filepath.Join(dir, dataDirName)+"/", func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(dir, dataDirName), p)
		// Read through the user-visible link, not the generation dir.
		visible := filepath.Join(dir, rel)
		st, err := os.Stat(visible)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(visible)
		if err != nil {
			return err
		}
		out[rel] = st.Mode().Perm().String() + " " + string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("reading volume %s: %v", dir, err)
	}
	return out
}

// entries lists dir's own entries, symlinks shown as name->target and
// generation directories as "..<ts>".
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		name := e.Name()
		if target, err := os.Readlink(filepath.Join(dir, name)); err == nil {
			if strings.HasPrefix(target, "..2") {
				target = "..<ts>"
			}
			out = append(out, name+"->"+target)
			continue
		}
		if strings.HasPrefix(name, "..2") {
			name = "..<ts>"
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func files(kv ...string) map[string]fileProjection {
	out := map[string]fileProjection{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = fileProjection{Data: []byte(kv[i+1]), Mode: 0o644}
	}
	return out
}

// In the cases below a change keeps the previous generation beside the new one
// (see writeAtomic), hence two "..<ts>" entries.
func TestWriteAtomic(t *testing.T) {
	cases := []struct {
		name        string
		first, then map[string]fileProjection
		wantChanged bool
		wantFiles   map[string]string
		wantEntries []string
	}{
		{
			name:        "unchanged payload writes nothing",
			first:       files("a", "1", "b", "2"),
			then:        files("a", "1", "b", "2"),
			wantChanged: false,
			wantFiles:   map[string]string{"a": "-rw-r--r-- 1", "b": "-rw-r--r-- 2"},
			wantEntries: []string{"..<ts>", "..data->..<ts>", "a->..data/a", "b->..data/b"},
		},
		{
			name:        "changed value swaps generation",
			first:       files("a", "1"),
			then:        files("a", "2"),
			wantChanged: true,
			wantFiles:   map[string]string{"a": "-rw-r--r-- 2"},
			wantEntries: []string{"..<ts>", "..<ts>", "..data->..<ts>", "a->..data/a"},
		},
		{
			name:        "removed key disappears, new key appears",
			first:       files("a", "1", "b", "2"),
			then:        files("b", "2", "c", "3"),
			wantChanged: true,
			wantFiles:   map[string]string{"b": "-rw-r--r-- 2", "c": "-rw-r--r-- 3"},
			wantEntries: []string{"..<ts>", "..<ts>", "..data->..<ts>", "b->..data/b", "c->..data/c"},
		},
		{
			name:        "nested path links its top directory",
			first:       files("a", "1"),
			then:        files("dir/x", "1", "dir/y", "2"),
			wantChanged: true,
			wantFiles:   map[string]string{"dir/x": "-rw-r--r-- 1", "dir/y": "-rw-r--r-- 2"},
			wantEntries: []string{"..<ts>", "..<ts>", "..data->..<ts>", "dir->..data/dir"},
		},
		{
			name:        "mode change alone rewrites",
			first:       files("a", "1"),
			then:        map[string]fileProjection{"a": {Data: []byte("1"), Mode: 0o400}},
			wantChanged: true,
			wantFiles:   map[string]string{"a": "-r-------- 1"},
			wantEntries: []string{"..<ts>", "..<ts>", "..data->..<ts>", "a->..data/a"},
		},
		{
			name:        "empty payload leaves only bookkeeping",
			first:       files("a", "1"),
			then:        files(),
			wantChanged: true,
			wantFiles:   map[string]string{},
			wantEntries: []string{"..<ts>", "..<ts>", "..data->..<ts>"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			if changed, err := writeAtomic(dir, tc.first, t0); err != nil || !changed {
				t.Fatalf("first write: changed=%v err=%v", changed, err)
			}
			before, _ := os.Readlink(filepath.Join(dir, dataDirName))
			changed, err := writeAtomic(dir, tc.then, t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			after, _ := os.Readlink(filepath.Join(dir, dataDirName))
			if (before != after) != tc.wantChanged {
				t.Errorf("..data %s -> %s, want swapped=%v", before, after, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.wantFiles, readVolume(t, dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEntries, entries(t, dir)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteAtomicNamesGenerationByTime(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeAtomic(dir, files("a", "1"), t0); err != nil {
		t.Fatal(err)
	}
	target, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if !strings.HasPrefix(target, "..2026_12_02_10_00_00.") {
		t.Errorf("..data -> %q, want a ..2026_12_02_10_00_00.* generation", target)
	}
}

func TestWriteAtomicRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "..data"} {
		t.Run(p, func(t *testing.T) {
			if _, err := writeAtomic(t.TempDir(), files(p, "x"), t0); err == nil {
				t.Errorf("path %q accepted", p)
			}
		})
	}
}

// TestWriteAtomicKeepsOnePreviousGeneration checks that generations do not pile
// up: after several changes only the current one and the one before remain.
func TestWriteAtomicKeepsOnePreviousGeneration(t *testing.T) {
	dir := t.TempDir()
	var targets []string
	for i := 0; i < 4; i++ {
		if _, err := writeAtomic(dir, files("a", strconv.Itoa(i)), t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		target, err := os.Readlink(filepath.Join(dir, dataDirName))
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	var gens []string
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.IsDir() && strings.HasPrefix(e.Name(), "..2") {
			gens = append(gens, e.Name())
		}
	}
	sort.Strings(gens)
	want := []string{targets[2], targets[3]}
	sort.Strings(want)
	if diff := cmp.Diff(want, gens); diff != "" {
		t.Errorf("generation directories (-want +got):\n%s", diff)
	}
}

// TestWriteAtomicReadersSeeWholeFiles reads a file while it is rewritten
// over and over: every read must return one complete version.
func TestWriteAtomicReadersSeeWholeFiles(t *testing.T) {
	dir := t.TempDir()
	versions := [][]byte{bytes.Repeat([]byte("A"), 256<<10), bytes.Repeat([]byte("B"), 256<<10)}
	if _, err := writeAtomic(dir, map[string]fileProjection{"f": {Data: versions[0], Mode: 0o644}}, t0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	var mu sync.Mutex
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := os.ReadFile(filepath.Join(dir, "f"))
				if err == nil && (bytes.Equal(got, versions[0]) || bytes.Equal(got, versions[1])) {
					continue
				}
				mu.Lock()
				bad = append(bad, "read "+string(got[:min(len(got), 8)])+"… "+errString(err))
				mu.Unlock()
			}
		}()
	}
	for i := 1; i <= 40; i++ {
		p := map[string]fileProjection{"f": {Data: versions[i%2], Mode: 0o644}}
		if _, err := writeAtomic(dir, p, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d partial or failed reads, first: %s", len(bad), bad[0])
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
