package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Names of the atomic writer's bookkeeping entries in a volume directory.
// They start with ".." so that no payload path (which may not contain a
// ".." element) can collide with them, as in kubelet.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	// tsDirLayout names the timestamped directory holding one generation
	// of the payload; os.MkdirTemp appends a random suffix to it.
	tsDirLayout = "..2006_01_02_15_04_05."
)

// fileProjection is one file of a volume's payload: its bytes and mode.
type fileProjection struct {
	Data []byte
	Mode int32
}

// validatePayloadPath rejects paths that could escape the volume
// directory or collide with the writer's own entries.
func validatePayloadPath(p string) error {
	switch {
	case p == "":
		return errors.New("invalid path: must not be empty")
	case len(p) > 4096:
		return fmt.Errorf("invalid path: %q must be less than or equal to 4096 characters", p)
	case path.IsAbs(p):
		return fmt.Errorf("invalid path: %q must be relative path", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("invalid path: %q must not start with '..'", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("invalid path: %q must not contain '..'", p)
		}
	}
	return nil
}

// writeAtomic makes dir hold exactly payload, the way kubelet's atomic
// writer does, so that a reader sees either the previous set of files or
// the new one, never a mix or a partial file:
//
//  1. the payload is written into a new timestamped directory ..<time>.<rand>;
//  2. a symlink ..data_tmp -> that directory is renamed over ..data, which
//     the kernel does atomically;
//  3. each top-level user-visible name is a symlink name -> ..data/name,
//     created once and unchanged by later updates;
//  4. names no longer in the payload are removed, and so is every timestamped
//     directory but the new one and the one ..data pointed to before.
//
// Kubelet removes the previous directory at once, so a reader whose open() had
// followed ..data to it just before the swap can fail with ENOENT (seen in
// TestWriteAtomicReadersSeeWholeFiles on a loaded machine). Keeping it until the
// next change closes that window; it holds the contents the pod could read a
// moment before, in the pod's own volume.
//
// It reports whether anything changed; an unchanged payload writes nothing.
func writeAtomic(dir string, payload map[string]fileProjection, now time.Time) (bool, error) {
	for p := range payload {
		if err := validatePayloadPath(p); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("creating volume directory %s: %w", dir, err)
	}
	oldTS, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("reading %s in %s: %w", dataDirName, dir, err)
	}
	if oldTS != "" && sameContents(filepath.Join(dir, oldTS), payload) && userLinksPresent(dir, payload) {
		return false, nil
	}

	tsDir, err := os.MkdirTemp(dir, now.UTC().Format(tsDirLayout))
	if err != nil {
		return false, fmt.Errorf("creating timestamped directory in %s: %w", dir, err)
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return false, fmt.Errorf("setting mode of %s: %w", tsDir, err)
	}
	if err := writePayload(tsDir, payload); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}

	tmpLink := filepath.Join(dir, newDataDirName)
	if err := os.Remove(tmpLink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("removing stale %s in %s: %w", newDataDirName, dir, err)
	}
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return false, fmt.Errorf("creating %s in %s: %w", newDataDirName, dir, err)
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return false, fmt.Errorf("switching %s in %s: %w", dataDirName, dir, err)
	}

	if err := syncUserLinks(dir, payload); err != nil {
		return true, err
	}
	return true, removeOldGenerations(dir, filepath.Base(tsDir), oldTS)
}

// removeOldGenerations removes every timestamped directory but those in keep:
// the older generations and any left by an interrupted write.
func removeOldGenerations(dir string, keep ...string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || slices.Contains(keep, name) || !strings.HasPrefix(name, "..") {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("removing old payload %s in %s: %w", name, dir, err)
		}
	}
	return nil
}

// writePayload writes every file of payload below tsDir with its mode.
func writePayload(tsDir string, payload map[string]fileProjection) error {
	for p, f := range payload {
		full := filepath.Join(tsDir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("creating directory for %s: %w", p, err)
		}
		if err := os.WriteFile(full, f.Data, fs.FileMode(f.Mode)&fs.ModePerm); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		// WriteFile's mode is filtered by the umask; the payload's is not.
		if err := os.Chmod(full, fs.FileMode(f.Mode)&fs.ModePerm); err != nil {
			return fmt.Errorf("setting mode of %s: %w", p, err)
		}
	}
	return nil
}

// sameContents reports whether tsDir holds exactly payload, modes included.
func sameContents(tsDir string, payload map[string]fileProjection) bool {
	count := 0
	err := filepath.WalkDir(tsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(tsDir, p)
		if err != nil {
			return err
		}
		want, ok := payload[filepath.ToSlash(rel)]
		if !ok {
			return fs.ErrNotExist
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != fs.FileMode(want.Mode)&fs.ModePerm {
			return fs.ErrInvalid
		}
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want.Data) {
			return fs.ErrInvalid
		}
		count++
		return nil
	})
	return err == nil && count == len(payload)
}

// topLevel returns the first element of each payload path: the names that
// are user-visible symlinks into ..data.
func topLevel(payload map[string]fileProjection) map[string]bool {
	names := make(map[string]bool, len(payload))
	for p := range payload {
		first, _, _ := strings.Cut(p, "/")
		names[first] = true
	}
	return names
}

// userLinksPresent reports whether every user-visible symlink exists.
func userLinksPresent(dir string, payload map[string]fileProjection) bool {
	for name := range topLevel(payload) {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// syncUserLinks creates the missing name -> ..data/name symlinks and
// removes the user-visible entries that are no longer in the payload.
func syncUserLinks(dir string, payload map[string]fileProjection) error {
	want := topLevel(payload)
	for name := range want {
		link := filepath.Join(dir, name)
		target := filepath.Join(dataDirName, name)
		if got, err := os.Readlink(link); err == nil && got == target {
			continue
		}
		if err := os.RemoveAll(link); err != nil {
			return fmt.Errorf("replacing %s in %s: %w", name, dir, err)
		}
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("linking %s in %s: %w", name, dir, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || want[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("removing %s from %s: %w", e.Name(), dir, err)
		}
	}
	return nil
}
