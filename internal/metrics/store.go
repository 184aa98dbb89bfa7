package metrics

import (
	"errors"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Usage is a rate over a window, what metrics.k8s.io reports: the CPU used between two
// readings divided by the time between them, and the memory working set of the later
// one.
type Usage struct {
	// CPU is in billionths of a core (nanocores).
	CPU uint64
	// Memory is the working set in bytes.
	Memory uint64
	// Timestamp is the later reading's time and Window the time between the two.
	Timestamp time.Time
	Window    time.Duration
}

// ContainerUsage is a container's Usage.
type ContainerUsage struct {
	Name string
	Usage
}

// Errors of Rate.
var (
	errNoWindow     = errors.New("the later reading is not after the earlier one")
	errCounterReset = errors.New("the CPU counter went back (a restart between the readings)")
)

// Rate computes the usage between two readings of one node or container: CPU as the
// counter's increase over the time between them, memory as last's working set.
func Rate(prev, last Point) (Usage, error) {
	window := last.Timestamp.Sub(prev.Timestamp)
	if window <= 0 {
		return Usage{}, errNoWindow
	}
	if last.CPU < prev.CPU {
		return Usage{}, errCounterReset
	}
	cpu := float64(last.CPU-prev.CPU) / window.Seconds()
	return Usage{CPU: uint64(cpu), Memory: last.Memory, Timestamp: last.Timestamp, Window: window}, nil
}

// freshContainerMinAge is how long a container must have run before its start (with a
// counter of zero) is taken as its earlier reading: the first seconds of a process are
// busier than its steady state, so a shorter window would overstate it
// (metrics-server's rule).
const freshContainerMinAge = 10 * time.Second

// Store keeps the last two readings of every node and container, the scrape before the
// last and the last, as metrics-server does; what it answers is the rate between them.
// Each Add replaces everything: a node missing from a scrape has no usage until it is
// scraped twice again. It is safe for concurrent use.
type Store struct {
	// Resolution is the scrape interval: a container that started less than this
	// before its first reading (and at least freshContainerMinAge) is measured from
	// its start.
	Resolution time.Duration

	mu                   sync.RWMutex
	lastNodes, prevNodes map[string]Point
	lastPods, prevPods   map[types.NamespacedName]map[string]Point
}

// Add stores a scrape's batch: each new reading becomes the last, and the last one of
// the same node or container instance becomes the previous, unless the new reading is
// no newer (then the previous stays) or the container restarted (then it has none).
func (s *Store) Add(b *Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lastNodes, prevNodes := map[string]Point{}, map[string]Point{}
	for name, p := range b.Nodes {
		lastNodes[name] = p
		if prev, ok := s.earlier(s.lastNodes[name], s.prevNodes[name], p); ok {
			prevNodes[name] = prev
		}
	}
	lastPods, prevPods := map[types.NamespacedName]map[string]Point{}, map[types.NamespacedName]map[string]Point{}
	for pod, cs := range b.Pods {
		last, prev := map[string]Point{}, map[string]Point{}
		for name, p := range cs {
			last[name] = p
			if fresh := p.Timestamp.Sub(p.StartTime); !p.StartTime.IsZero() && fresh >= freshContainerMinAge && fresh < s.Resolution {
				prev[name] = Point{Timestamp: p.StartTime, StartTime: p.StartTime}
				continue
			}
			old, ok := s.lastPods[pod][name]
			if !ok || !p.StartTime.Equal(old.StartTime) {
				continue // new or restarted: its counters began again
			}
			if prevPoint, ok := s.earlier(old, s.prevPods[pod][name], p); ok {
				prev[name] = prevPoint
			}
		}
		lastPods[pod] = last
		if len(prev) > 0 {
			prevPods[pod] = prev
		}
	}
	s.lastNodes, s.prevNodes, s.lastPods, s.prevPods = lastNodes, prevNodes, lastPods, prevPods
}

// earlier picks the reading to pair with p: the stored last one when p is newer, else
// the stored previous one when that is older than p.
func (s *Store) earlier(last, prev, p Point) (Point, bool) {
	switch {
	case last.Timestamp.IsZero():
		return Point{}, false
	case p.Timestamp.After(last.Timestamp):
		return last, true
	case !prev.Timestamp.IsZero() && prev.Timestamp.Before(p.Timestamp):
		return prev, true
	}
	return Point{}, false
}

// Node returns a node's usage; ok is false until it was scraped twice.
func (s *Store) Node(name string) (Usage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	last, ok := s.lastNodes[name]
	if !ok {
		return Usage{}, false
	}
	prev, ok := s.prevNodes[name]
	if !ok {
		return Usage{}, false
	}
	u, err := Rate(prev, last)
	return u, err == nil
}

// Pod returns the usage of each of a pod's running containers, by name, and the
// pod's timestamp and window (its containers' earliest); ok is false unless every
// container has two readings, so that a pod is never reported without some of its
// containers.
func (s *Store) Pod(pod types.NamespacedName) (cs []ContainerUsage, at time.Time, window time.Duration, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	last, prev := s.lastPods[pod], s.prevPods[pod]
	if len(last) == 0 {
		return nil, time.Time{}, 0, false
	}
	for name, l := range last {
		p, found := prev[name]
		if !found {
			return nil, time.Time{}, 0, false
		}
		u, err := Rate(p, l)
		if err != nil {
			return nil, time.Time{}, 0, false
		}
		cs = append(cs, ContainerUsage{Name: name, Usage: u})
		if at.IsZero() || u.Timestamp.Before(at) {
			at, window = u.Timestamp, u.Window
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	return cs, at, window, true
}
