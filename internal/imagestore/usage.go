package imagestore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// LeaseGrace is how long a lease counts as live before its container's root file system is
// mounted: Acquire comes before the image's layers are unpacked and mounted, which may take a
// while for a big image. After it, only a mounted root file system keeps a lease live.
const LeaseGrace = 10 * time.Minute

// Lease records that one container instance uses an image. The agent acquires it before it
// unpacks and mounts the image for the instance and releases it once the instance's bundle is
// gone. It lives in DATA/images/leases/ as one small JSON file per instance, written by rename,
// so a crash leaves either the whole file or none.
//
// A lease outlives the agent that wrote it, as the container does (the node's shim supervises
// it). It is live while its bundle's root file system Dir/rootfs is mounted (or, for LeaseGrace
// after it was written, while Dir exists); a lease whose container is gone for good (the agent
// died and the cluster was stopped, its mounts removed) is stale, counts for nothing, and is
// removed by the next Sweep.
type Lease struct {
	// Digest is the image's manifest digest "sha256:...".
	Digest string `json:"digest"`
	// Pod is "namespace/name" of the container's pod, Container its name, Node the node.
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Node      string `json:"node"`
	// Dir is the instance's bundle directory, absolute; its root file system is Dir/rootfs.
	Dir string `json:"dir"`
	// Mount, when set, is the absolute mount point of the image that keeps the lease live
	// instead of Dir/rootfs: an image volume's directory, where the image is mounted.
	Mount string `json:"mount,omitempty"`
	// Created is when the lease was acquired.
	Created time.Time `json:"created"`
}

// Acquire records l. It creates l.Dir first, so a lease never names a bundle that was not
// there yet, and marks the image as used now (GarbageCollect removes the least recently used
// images first).
func (s *Store) Acquire(l Lease) error {
	h, err := v1.NewHash(l.Digest)
	if err != nil {
		return fmt.Errorf("image lease for %s: digest %q: %w", l.Dir, l.Digest, err)
	}
	if !filepath.IsAbs(l.Dir) {
		return fmt.Errorf("image lease: bundle directory %q is not absolute", l.Dir)
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return fmt.Errorf("image lease for %s: %w", l.Dir, err)
	}
	if l.Created.IsZero() {
		l.Created = time.Now()
	}
	raw, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if err := s.ensureDirs(); err != nil {
		return err
	}
	if err := s.writeFileAtomic(s.leasePath(l.Dir), raw); err != nil {
		return fmt.Errorf("image lease for %s: %w", l.Dir, err)
	}
	s.touchUsed(h)
	return nil
}

// Release removes the lease of the bundle dir, if any, and marks its image as used now.
func (s *Store) Release(dir string) error {
	path := s.leasePath(dir)
	if l, err := readLease(path); err == nil {
		if h, err := v1.NewHash(l.Digest); err == nil {
			s.touchUsed(h)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("releasing the image lease of %s: %w", dir, err)
	}
	return nil
}

// Leases returns the live leases, ordered by pod, container and directory.
func (s *Store) Leases() ([]Lease, error) {
	live, _, err := s.leases(time.Now())
	return live, err
}

// InUse returns the pods ("namespace/name", sorted, each once) whose containers hold a live
// lease on the image with manifest digest.
func (s *Store) InUse(digest string) ([]string, error) {
	live, err := s.Leases()
	if err != nil {
		return nil, err
	}
	return podsOf(live, digest), nil
}

func podsOf(leases []Lease, digest string) []string {
	seen := map[string]bool{}
	var pods []string
	for _, l := range leases {
		if l.Digest == digest && !seen[l.Pod] {
			seen[l.Pod] = true
			pods = append(pods, l.Pod)
		}
	}
	sort.Strings(pods)
	return pods
}

// LastUsed is when a container last started or stopped using the image with manifest digest;
// for an image no container used yet, when it was stored.
func (s *Store) LastUsed(digest string) time.Time {
	h, err := v1.NewHash(digest)
	if err != nil {
		return time.Time{}
	}
	if fi, err := os.Stat(s.usedPath(h)); err == nil {
		return fi.ModTime()
	}
	if fi, err := os.Stat(s.blobPath(h)); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

// leases reads every lease file and splits them into live and stale (their file paths).
func (s *Store) leases(now time.Time) (live []Lease, stale []string, err error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "leases"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("image store %s: leases: %w", s.dir, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(s.dir, "leases", e.Name())
		l, err := readLease(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil || !leaseLive(l, now) {
			stale = append(stale, path)
			continue
		}
		live = append(live, l)
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i], live[j]
		if a.Pod != b.Pod {
			return a.Pod < b.Pod
		}
		if a.Container != b.Container {
			return a.Container < b.Container
		}
		return a.Dir < b.Dir
	})
	return live, stale, nil
}

// leaseLive: the bundle exists and its root file system (or l.Mount) is mounted, or the
// lease is younger than LeaseGrace (the mount is yet to come).
func leaseLive(l Lease, now time.Time) bool {
	var dir unix.Stat_t
	if err := unix.Stat(l.Dir, &dir); err != nil {
		return false
	}
	if now.Sub(l.Created) < LeaseGrace {
		return true
	}
	mount := filepath.Join(l.Dir, "rootfs")
	if l.Mount != "" {
		mount = l.Mount
	}
	var root, parent unix.Stat_t
	return unix.Lstat(mount, &root) == nil && unix.Stat(filepath.Dir(mount), &parent) == nil && root.Dev != parent.Dev
}

func readLease(path string) (Lease, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Lease{}, err
	}
	var l Lease
	if err := json.Unmarshal(raw, &l); err != nil {
		return Lease{}, fmt.Errorf("lease %s: %w", path, err)
	}
	return l, nil
}

// leasePath names a bundle's lease by a hash of its path, so that any process finds it again.
func (s *Store) leasePath(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return filepath.Join(s.dir, "leases", hex.EncodeToString(sum[:16])+".json")
}

func (s *Store) usedPath(h v1.Hash) string { return filepath.Join(s.dir, "used", h.Hex) }

// touchUsed sets the image's last-used time to now. It is a hint for the garbage collector's
// order: failing to record it is not worth failing a container for.
func (s *Store) touchUsed(h v1.Hash) {
	path := s.usedPath(h)
	now := time.Now()
	if err := os.Chtimes(path, now, now); errors.Is(err, os.ErrNotExist) {
		_ = os.MkdirAll(filepath.Dir(path), 0o700)
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Close()
		}
	}
}

// ensureDirs makes the directories this file and remove.go add to the layout, for a store
// opened before they existed.
func (s *Store) ensureDirs() error {
	for _, d := range []string{"leases", "used"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o700); err != nil {
			return fmt.Errorf("image store %s: %w", s.dir, err)
		}
	}
	return nil
}
