package imagestore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// Usage is the state of the file system holding the store, in bytes.
type Usage struct {
	Capacity, Available int64
}

// UsageFunc measures the file system holding the store.
type UsageFunc func() (Usage, error)

// FSUsage measures the file system of dir with statfs(2), as kubelet measures its image file
// system: capacity is the size of the file system, available what unprivileged users may
// still write.
func FSUsage(dir string) UsageFunc {
	return func() (Usage, error) {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return Usage{}, fmt.Errorf("statfs %s: %w", dir, err)
		}
		return Usage{Capacity: int64(st.Blocks) * st.Bsize, Available: int64(st.Bavail) * st.Bsize}, nil
	}
}

// ErrInvalidCapacity is GarbageCollect's error for a file system that reports no capacity
// (kubelet's InvalidDiskCapacity).
var ErrInvalidCapacity = errors.New("invalid capacity 0 on image filesystem")

// Default thresholds of kubelet's image garbage collection (imageGCHighThresholdPercent,
// imageGCLowThresholdPercent).
const (
	DefaultGCHighThresholdPercent = 85
	DefaultGCLowThresholdPercent  = 80
)

// DefaultGCMinAge is kubelet's imageMinimumGCAge: an image used or stored more recently is
// not removed, so that an image just loaded or built survives until its pod starts.
const DefaultGCMinAge = 2 * time.Minute

// GCPolicy is the band kubelet's image garbage collection keeps the image file system in: at
// HighThresholdPercent of use or more, unused images go until use is at LowThresholdPercent.
// Images used (or stored) less than MinAge ago stay.
type GCPolicy struct {
	HighThresholdPercent, LowThresholdPercent int
	MinAge                                    time.Duration
}

// Validate checks the thresholds as kubelet's configuration validation does.
func (p GCPolicy) Validate() error {
	switch {
	case p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100:
		return fmt.Errorf("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) %d must be between 0 and 100, inclusive", p.HighThresholdPercent)
	case p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100:
		return fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be between 0 and 100, inclusive", p.LowThresholdPercent)
	case p.MinAge < 0:
		return fmt.Errorf("invalid configuration: imageMinimumGCAge (--minimum-image-ttl-duration) %v must not be negative", p.MinAge)
	case p.LowThresholdPercent >= p.HighThresholdPercent:
		return fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %d",
			p.LowThresholdPercent, p.HighThresholdPercent)
	}
	return nil
}

// GCResult is what one GarbageCollect did.
type GCResult struct {
	// UsagePercent is the file system's use when it started, Capacity its size.
	UsagePercent int
	Capacity     int64
	// ToFree is what had to be freed to reach the low threshold (0: under the high one),
	// Freed what removing images freed.
	ToFree, Freed int64
	// Removed are the images removed, in order.
	Removed []Image
}

// FreeSpaceError is GarbageCollect's error when removing every image it could did not bring
// the use down to the low threshold. Its message is kubelet's FreeDiskSpaceFailed event's.
type FreeSpaceError struct {
	UsagePercent    int
	Capacity, Freed int64
}

func (e *FreeSpaceError) Error() string {
	return fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %s used). "+
		"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
		e.UsagePercent, HumanSize(e.Capacity), e.Freed)
}

// GarbageCollect is kubelet's image garbage collection over the store: when the file system
// usage measures is at p.HighThresholdPercent or more, it removes images that no live lease
// uses and that were not used for p.MinAge, least recently used first (see LastUsed), sweeping their content after each, until
// the use is down to p.LowThresholdPercent. Images in use are never removed; the catalog's
// images count like any other (they are rebuilt on their next use). It returns a
// *FreeSpaceError when it could not free enough.
func (s *Store) GarbageCollect(ctx context.Context, p GCPolicy, usage UsageFunc) (GCResult, error) {
	var res GCResult
	if err := p.Validate(); err != nil {
		return res, err
	}
	u, err := usage()
	if err != nil {
		return res, err
	}
	u.Available = min(u.Available, u.Capacity)
	if u.Capacity <= 0 {
		return res, ErrInvalidCapacity
	}
	res.Capacity = u.Capacity
	res.UsagePercent = 100 - int(u.Available*100/u.Capacity)
	if res.UsagePercent < p.HighThresholdPercent {
		return res, nil
	}
	res.ToFree = u.Capacity*int64(100-p.LowThresholdPercent)/100 - u.Available
	candidates, err := s.evictionOrder(p.MinAge)
	if err != nil {
		return res, err
	}
	var errs []error
	for _, img := range candidates {
		if res.Freed >= res.ToFree {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		// In use since the candidates were listed: keep it.
		if pods, err := s.InUse(img.Digest); err != nil || len(pods) > 0 {
			continue
		}
		if err := s.removeEntry(img.Digest); err != nil {
			if !errors.Is(err, ErrNotFound) {
				errs = append(errs, err)
			}
			continue
		}
		res.Removed = append(res.Removed, img)
		if _, err := s.Sweep(ctx); err != nil {
			errs = append(errs, err)
		}
		now, err := usage()
		if err != nil {
			return res, err
		}
		res.Freed = max(0, min(now.Available, now.Capacity)-u.Available)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", res.ToFree, res.Freed, err)
	}
	if res.Freed < res.ToFree {
		return res, &FreeSpaceError{UsagePercent: res.UsagePercent, Capacity: u.Capacity, Freed: res.Freed}
	}
	return res, nil
}

// evictionOrder lists the images no live lease uses and none used for minAge, least recently
// used first.
func (s *Store) evictionOrder(minAge time.Duration) ([]Image, error) {
	images, err := s.List()
	if err != nil {
		return nil, err
	}
	live, err := s.Leases()
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, l := range live {
		used[l.Digest] = true
	}
	type candidate struct {
		img      Image
		lastUsed time.Time
	}
	var cs []candidate
	now := time.Now()
	for _, img := range images {
		lastUsed := s.LastUsed(img.Digest)
		if !used[img.Digest] && now.Sub(lastUsed) >= minAge {
			cs = append(cs, candidate{img, lastUsed})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].lastUsed.Before(cs[j].lastUsed) })
	out := make([]Image, len(cs))
	for i, c := range cs {
		out[i] = c.img
	}
	return out, nil
}

// HumanSize prints a byte count in binary units, as kubelet's image garbage collection
// messages do: "512 B", "1.5 KiB", "12.3 GiB".
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	size := float64(n) / unit
	for _, suffix := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if size < unit || suffix == "TiB" {
			return fmt.Sprintf("%.1f %s", size, suffix)
		}
		size /= unit
	}
	return ""
}
