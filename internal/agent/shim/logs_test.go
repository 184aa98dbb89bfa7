package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// logFiles returns the names in dir, sorted.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// logLines returns the message of every entry of a CRI log file.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) != 4 || f[1] != "stdout" || f[2] != "F" {
			t.Fatalf("%s: malformed entry %q", path, l)
		}
		lines = append(lines, f[3])
	}
	return lines
}

func TestLogRotation(t *testing.T) {
	dir := t.TempDir()
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }
	// Each entry is 30 (time) + 1 + 6 (stdout) + 1 + 1 (F) + 1 + 7 (line-NN) + 1 = 48
	// bytes: with MaxSize 100 a file takes three entries before the next one rotates it.
	const entry = 48
	policy := LogPolicy{MaxSize: 100, MaxFiles: 3}
	path := filepath.Join(dir, "0.log")
	log, err := openCRILog(path, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	w := &streamWriter{log: log, stream: "stdout"}
	for i := range 20 {
		fmt.Fprintf(w, "line-%02d\n", i)
	}
	w.flush()
	log.close()

	if got, want := logFiles(t, dir), []string{"0.log", "0.log.1", "0.log.2"}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v (MaxFiles 3: the current file and two rotations)", got, want)
	}
	// 20 entries, three per file: the current file has the last two, its rotations
	// the three before each, and the oldest twelve are gone.
	for name, want := range map[string][]string{
		"0.log":   {"line-18", "line-19"},
		"0.log.1": {"line-15", "line-16", "line-17"},
		"0.log.2": {"line-12", "line-13", "line-14"},
	} {
		if got := logLines(t, filepath.Join(dir, name)); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
		if st, _ := os.Stat(filepath.Join(dir, name)); st.Size() > policy.MaxSize+entry {
			t.Errorf("%s is %d bytes, more than MaxSize and one entry", name, st.Size())
		}
	}

	// An instance reopening its file (an agent restart) goes on from its size.
	log, err = openCRILog(path, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	w = &streamWriter{log: log, stream: "stdout"}
	fmt.Fprintf(w, "line-20\nline-21\n")
	log.close()
	if got, want := logLines(t, path), []string{"line-21"}; !slices.Equal(got, want) {
		t.Errorf("after reopening, 0.log = %v, want %v", got, want)
	}
	if got, want := logLines(t, path+".1"), []string{"line-18", "line-19", "line-20"}; !slices.Equal(got, want) {
		t.Errorf("after reopening, 0.log.1 = %v, want %v", got, want)
	}
}

func TestLogPolicyCheck(t *testing.T) {
	for _, tt := range []struct {
		policy LogPolicy
		want   string
	}{
		{LogPolicy{MaxSize: 10 << 20, MaxFiles: 5}, ""},
		{LogPolicy{MaxSize: 0, MaxFiles: 5}, "containerLogMaxSize must be positive, got 0 bytes"},
		{LogPolicy{MaxSize: 1, MaxFiles: 1}, "containerLogMaxFiles must be greater than 1, got 1"},
	} {
		err := tt.policy.Check()
		if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
			t.Errorf("%+v: Check() = %v, want %q", tt.policy, err, tt.want)
		}
	}
	if _, err := openCRILog(filepath.Join(t.TempDir(), "0.log"), LogPolicy{MaxSize: 1}, time.Now); err == nil {
		t.Error("openCRILog accepted MaxFiles 0")
	}
}

// TestFlushWritesPartialLine: an output that ends without a newline is logged as a
// partial entry, as containerd logs it, so readers add no newline.
func TestFlushWritesPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	log, err := openCRILog(path, LogPolicy{MaxSize: 1 << 20, MaxFiles: 2}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	w := &streamWriter{log: log, stream: "stdout"}
	fmt.Fprint(w, "line\nDONE")
	w.flush()
	log.close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) != 4 {
			t.Fatalf("entry %q", l)
		}
		tags = append(tags, f[2]+" "+f[3])
	}
	if want := []string{"F line", "P DONE"}; !slices.Equal(tags, want) {
		t.Errorf("entries %q, want %q", tags, want)
	}
}
