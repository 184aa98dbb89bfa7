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
