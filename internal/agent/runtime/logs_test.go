package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
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

// TestPruneLogsKeepsPrevious: starting instance 2 removes instance 0's files, rotated
// ones included, and keeps instance 1's for `kubectl logs --previous`.
func TestPruneLogsKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"0.log", "0.log.1", "1.log", "1.log.1", "1.log.2", "2.log"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	(&Manager{}).pruneLogs(dir, 2)
	if got, want := logFiles(t, dir), []string{"1.log", "1.log.1", "1.log.2", "2.log"}; !slices.Equal(got, want) {
		t.Errorf("after pruning: %v, want %v", got, want)
	}
}

// TestLastLogLinesExactBytes: the FallbackToLogsOnError message is the log's bytes as
// the program wrote them: full lines end in a newline, a last partial one does not.
func TestLastLogLinesExactBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	log := "2026-12-04T10:00:00.000000000Z stdout F one\n" +
		"2026-12-04T10:00:00.000000000Z stderr P tw\n" +
		"2026-12-04T10:00:00.000000000Z stderr F o\n" +
		"2026-12-04T10:00:01.000000000Z stdout P DONE\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := lastLogLines(path, 80, 2048), "one\ntwo\nDONE"; got != want {
		t.Errorf("lastLogLines = %q, want %q", got, want)
	}
	if got, want := lastLogLines(path, 80, 6), "o\nDONE"; got != want {
		t.Errorf("lastLogLines with 6 bytes = %q, want %q", got, want)
	}
}
