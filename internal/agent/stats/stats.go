// Package stats is the node agent's account of resource usage, served as kubelet serves
// it on its port: the Summary API (GET /stats/summary) and the resource metrics
// endpoint (GET /metrics/resource, Prometheus text) that metrics-server scrapes to
// answer `kubectl top` and the HorizontalPodAutoscaler.
//
// Containers and pods are read from their cgroups (runc.UsageReader: cumulative CPU
// time and the memory working set). What a node uses needs a definition, because the
// nodes of a local cluster share one machine: the root cgroup kubelet reads would count
// the machine once per node. Here a node's usage is
//
//	the node's cgroup (/tranche/<node namespace>: every pod of the node, system pods and
//	sandbox containers included)
//	+ the agent process itself (kubelet, runtime and proxy in one: the CPU time of its
//	  own threads and its anonymous resident memory; the `runc` and `nft` commands it
//	  runs are not counted, nor the binary's pages shared with the other nodes' agents)
//
// and the Summary reports the two parts as the system containers "pods" and "kubelet".
// Nothing else of the machine is counted, so the nodes' figures add up to what the
// cluster uses, not to what the machine does. Swap is not reported: containers run
// without swap, as kubelet runs them by default.
package stats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/agent/runc"
)

// Container is a running container instance and its cgroups (runtime.ContainerRef).
type Container struct {
	Namespace, Pod string
	PodUID         types.UID
	// Name is the container's name in the pod spec.
	Name string
	// Cgroup is the instance's cgroup, PodCgroup its pod's.
	Cgroup, PodCgroup string
	// StartedAt is when the instance started; PodStartTime the pod's status.startTime.
	StartedAt, PodStartTime time.Time
}

// Reader reads a cgroup's usage (runc.UsageReader). Its error wraps fs.ErrNotExist
// for a cgroup that does not exist.
type Reader interface {
	Read(path string) (runc.Usage, error)
}

// Config is what a Provider reads.
type Config struct {
	// NodeName is the node's name in the Summary.
	NodeName string
	// NodeCgroup is the node's cgroup, the parent of its pods' (runc.NodeCgroup).
	NodeCgroup string
	// Containers lists the node's running containers (runtime.Manager.Containers).
	Containers func() []Container
	// Reader reads cgroups (required).
	Reader Reader
	// Agent reads the agent process's own usage (SelfUsage); nil counts none.
	Agent func() (runc.Usage, error)
	// MemoryCapacity is the node's memory capacity in bytes, what the node's
	// availableBytes is reckoned from; 0 reports none.
	MemoryCapacity uint64
	// StartTime is when the node started (the Summary's node startTime).
	StartTime time.Time
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// Provider reads the node's usage on demand; it keeps nothing but the previous CPU
// readings of /stats/summary requests, from which usageNanoCores is computed.
type Provider struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// prevCPU are the CPU readings of the previous Summary, by cgroup path ("" for
	// the node).
	prevCPU map[string]cpuReading
}

type cpuReading struct {
	at    time.Time
	total uint64
}

// New checks cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.Reader == nil || cfg.Containers == nil {
		return nil, errors.New("stats: a cgroup reader and a container list are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Provider{cfg: cfg, log: cfg.Logger, prevCPU: map[string]cpuReading{}}, nil
}

// Snapshot reads the usage of the node, its pods and their running containers now, as
// a kubelet Summary with cumulative counters only (no usageNanoCores). Containers and
// pods whose cgroup disappeared meanwhile are left out; an error means the node's own
// usage could not be read.
func (p *Provider) Snapshot() (*statsapi.Summary, error) {
	cs := p.cfg.Containers()
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Pod != b.Pod {
			return a.Pod < b.Pod
		}
		if a.PodUID != b.PodUID {
			return a.PodUID < b.PodUID
		}
		return a.Name < b.Name
	})
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: p.cfg.NodeName, StartTime: metav1.NewTime(p.cfg.StartTime)}, Pods: []statsapi.PodStats{}}
	for i := 0; i < len(cs); {
		j := i
		for j < len(cs) && cs[j].PodUID == cs[i].PodUID {
			j++
		}
		if ps, ok := p.pod(cs[i:j]); ok {
			s.Pods = append(s.Pods, ps)
		}
		i = j
	}
	pods, err := p.read(p.cfg.NodeCgroup)
	if errors.Is(err, fs.ErrNotExist) {
		// No pod was ever made on the node: its cgroup does not exist yet.
		pods, err = runc.Usage{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", p.cfg.NodeName, err)
	}
	at := p.cfg.Now()
	var agent runc.Usage
	if p.cfg.Agent != nil {
		if agent, err = p.cfg.Agent(); err != nil {
			return nil, fmt.Errorf("node %s: the agent's own usage: %w", p.cfg.NodeName, err)
		}
	}
	node := runc.Usage{
		CPU: pods.CPU + agent.CPU, MemoryUsage: pods.MemoryUsage + agent.MemoryUsage, WorkingSet: pods.WorkingSet + agent.WorkingSet,
		RSS: pods.RSS + agent.RSS, PageFaults: pods.PageFaults + agent.PageFaults, MajorPageFaults: pods.MajorPageFaults + agent.MajorPageFaults,
	}
	s.Node.CPU, s.Node.Memory = cpuStats(node, at), memoryStats(node, p.cfg.MemoryCapacity, at)
	s.Node.SystemContainers = []statsapi.ContainerStats{
		{Name: statsapi.SystemContainerKubelet, StartTime: metav1.NewTime(p.cfg.StartTime), CPU: cpuStats(agent, at), Memory: memoryStats(agent, 0, at)},
		{Name: statsapi.SystemContainerPods, StartTime: metav1.NewTime(p.cfg.StartTime), CPU: cpuStats(pods, at), Memory: memoryStats(pods, p.cfg.MemoryCapacity, at)},
	}
	return s, nil
}

// pod builds the stats of the pod whose running containers are cs; ok is false when
// the pod's cgroup is gone.
func (p *Provider) pod(cs []Container) (statsapi.PodStats, bool) {
	first := cs[0]
	ps := statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: first.Pod, Namespace: first.Namespace, UID: string(first.PodUID)},
		StartTime:  metav1.NewTime(first.PodStartTime),
		Containers: []statsapi.ContainerStats{},
	}
	for _, c := range cs {
		u, err := p.read(c.Cgroup)
		if err != nil {
			p.skip(err, "container", c.Namespace+"/"+c.Pod+"/"+c.Name)
			continue
		}
		at := p.cfg.Now()
		ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: metav1.NewTime(c.StartedAt),
			CPU: cpuStats(u, at), Memory: memoryStats(u, u.MemoryLimit, at)})
	}
	u, err := p.read(first.PodCgroup)
	if err != nil {
		p.skip(err, "pod", first.Namespace+"/"+first.Pod)
		return ps, false
	}
	at := p.cfg.Now()
	ps.CPU, ps.Memory = cpuStats(u, at), memoryStats(u, u.MemoryLimit, at)
	return ps, true
}

func (p *Provider) read(path string) (runc.Usage, error) { return p.cfg.Reader.Read(path) }

// skip logs a cgroup that could not be read: at debug level when it is gone (the
// container ended between listing and reading, an ordinary race).
func (p *Provider) skip(err error, kind, name string) {
	level := slog.LevelWarn
	if errors.Is(err, fs.ErrNotExist) {
		level = slog.LevelDebug
	}
	p.log.Log(context.Background(), level, "no usage statistics", kind, name, "err", err)
}

// Summary is Snapshot with usageNanoCores: the CPU rate since the previous Summary of
// each container, pod and the node that were in it (kubelet's Summary carries the same
// rate over its own sampling interval). The first Summary has none.
func (p *Provider) Summary() (*statsapi.Summary, error) {
	s, err := p.Snapshot()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := map[string]cpuReading{}
	rate := func(key string, c *statsapi.CPUStats) {
		if c == nil || c.UsageCoreNanoSeconds == nil {
			return
		}
		cur := cpuReading{at: c.Time.Time, total: *c.UsageCoreNanoSeconds}
		next[key] = cur
		if prev, ok := p.prevCPU[key]; ok {
			if v, ok := nanoCores(prev, cur); ok {
				c.UsageNanoCores = &v
			}
		}
	}
	rate("", s.Node.CPU)
	for i := range s.Pods {
		pod := &s.Pods[i]
		rate("pod/"+pod.PodRef.UID, pod.CPU)
		for j := range pod.Containers {
			rate("container/"+pod.PodRef.UID+"/"+pod.Containers[j].Name+"/"+pod.Containers[j].StartTime.String(), pod.Containers[j].CPU)
		}
	}
	p.prevCPU = next
	return s, nil
}

// nanoCores is the CPU rate between two readings of one counter, in billionths of a
// core; ok is false when time did not advance or the counter went back (a restart).
func nanoCores(prev, cur cpuReading) (uint64, bool) {
	dt := cur.at.Sub(prev.at)
	if dt <= 0 || cur.total < prev.total {
		return 0, false
	}
	return uint64(float64(cur.total-prev.total) / dt.Seconds()), true
}

func cpuStats(u runc.Usage, at time.Time) *statsapi.CPUStats {
	total := uint64(u.CPU)
	return &statsapi.CPUStats{Time: metav1.NewTime(at), UsageCoreNanoSeconds: &total}
}

// memoryStats reports u; availableBytes is limit less the working set when there is a
// limit (kubelet's rule), none otherwise.
func memoryStats(u runc.Usage, limit uint64, at time.Time) *statsapi.MemoryStats {
	m := &statsapi.MemoryStats{Time: metav1.NewTime(at), UsageBytes: ptr.To(u.MemoryUsage), WorkingSetBytes: ptr.To(u.WorkingSet),
		RSSBytes: ptr.To(u.RSS), PageFaults: ptr.To(u.PageFaults), MajorPageFaults: ptr.To(u.MajorPageFaults)}
	if limit > 0 {
		avail := uint64(0)
		if limit > u.WorkingSet {
			avail = limit - u.WorkingSet
		}
		m.AvailableBytes = &avail
	}
	return m
}
