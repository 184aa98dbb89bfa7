package agent

import (
	"log/slog"
	"net/http"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/runtime"
	"github.com/tranche/tranche/internal/agent/stats"
)

// resourceStats is the handler of the node's /stats/summary and /metrics/resource:
// the runtime's running containers, read from their cgroups, and the node as
// internal/agent/stats defines it (its cgroup and this agent process).
func resourceStats(rt *runtime.Manager, nodeName string, log *slog.Logger) (http.Handler, error) {
	reader, err := runc.NewUsageReader()
	if err != nil {
		return nil, err
	}
	var memory uint64
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		memory = uint64(si.Totalram) * uint64(si.Unit)
	}
	p, err := stats.New(stats.Config{
		NodeName:   nodeName,
		NodeCgroup: rt.NodeCgroup(),
		Containers: func() []stats.Container {
			refs := rt.Containers()
			out := make([]stats.Container, len(refs))
			for i, r := range refs {
				out[i] = stats.Container{Namespace: r.Namespace, Pod: r.PodName, PodUID: r.PodUID, Name: r.Name,
					Cgroup: r.Cgroup, PodCgroup: r.PodCgroup, StartedAt: r.StartedAt, PodStartTime: r.PodStartTime}
			}
			return out
		},
		Reader:         reader,
		Agent:          stats.SelfUsage,
		MemoryCapacity: memory,
		StartTime:      time.Now(),
		Logger:         log,
	})
	if err != nil {
		return nil, err
	}
	return p.Handler(), nil
}
