package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/agent/status"
)

// What survives an agent restart about a pod's containers, so that the next agent
// adopts the instances the shim still runs, with their restart counts and last states,
// instead of starting others: kubelet gets the same from the container runtime's
// records.

// podFile holds a pod's container records, in the pod's directory.
const podFile = "containers.json"

// podRecord is a pod's container records and its sandbox container, if any.
type podRecord struct {
	Containers []containerRecord `json:"containers"`
	PIDSandbox *sandboxContainer `json:"pidSandbox,omitempty"`
}

// sandboxContainer is a running pidSandbox.
type sandboxContainer struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`
	PID int    `json:"pid"`
}

// containerRecord is one container of the pod across its instances.
type containerRecord struct {
	Name         string                       `json:"name"`
	Init         bool                         `json:"init,omitempty"`
	Ephemeral    bool                         `json:"ephemeral,omitempty"`
	Image        string                       `json:"image,omitempty"`
	ImageID      string                       `json:"imageID,omitempty"`
	ID           string                       `json:"id,omitempty"`
	RestartCount int32                        `json:"restartCount,omitempty"`
	Started      bool                         `json:"started,omitempty"`
	Ready        bool                         `json:"ready,omitempty"`
	StartedAt    time.Time                    `json:"startedAt,omitzero"`
	Term         *v1.ContainerStateTerminated `json:"term,omitempty"`
	PrevTerm     *v1.ContainerStateTerminated `json:"prevTerm,omitempty"`
	Instance     *instanceRecord              `json:"instance,omitempty"`
}

// instanceRecord is a running instance.
type instanceRecord struct {
	ID         string `json:"id"`
	Dir        string `json:"dir"`
	Cgroup     string `json:"cgroup"`
	LogPath    string `json:"logPath"`
	TermLog    string `json:"termLog"`
	InitPID    int    `json:"initPID"`
	StopSignal int    `json:"stopSignal,omitempty"`
}

// saveContainers writes the pod's container records atomically; a failure is logged,
// as it only costs the next agent its memory of the pod. ps.mu is held.
func (m *Manager) saveContainers(ps *podState) {
	var rec podRecord
	for _, group := range []struct {
		cs              map[string]*container
		init, ephemeral bool
	}{{ps.containers, false, false}, {ps.inits, true, false}, {ps.ephemerals, false, true}} {
		for _, c := range group.cs {
			r := containerRecord{Name: c.name, Init: group.init, Ephemeral: group.ephemeral, Image: c.image, ImageID: c.imageID, ID: c.id,
				RestartCount: c.restartCount, Started: c.started, Ready: c.ready, StartedAt: c.startedAt, Term: c.term, PrevTerm: c.prevTerm}
			if in := c.inst; in != nil {
				r.Instance = &instanceRecord{ID: in.id, Dir: in.dir, Cgroup: in.cgroup, LogPath: in.logPath, TermLog: in.termLog,
					InitPID: in.initPID, StopSignal: int(in.stopSignal)}
			}
			rec.Containers = append(rec.Containers, r)
		}
	}
	if sb := ps.pidSandbox; sb != nil {
		rec.PIDSandbox = &sandboxContainer{ID: sb.id, Dir: sb.dir, PID: sb.pid}
	}
	data, err := json.Marshal(rec)
	if err == nil {
		p := filepath.Join(m.podDir(ps.pod.UID), podFile)
		tmp := p + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, p)
		}
	}
	if err != nil {
		m.cfg.Logger.Warn("recording the pod's containers", "pod", podID(ps.pod), "err", err)
	}
}

// loadPodRecord reads a pod's container records; ok is false when there are none.
func (m *Manager) loadPodRecord(uid types.UID) (podRecord, bool) {
	var rec podRecord
	data, err := os.ReadFile(filepath.Join(m.podDir(uid), podFile))
	if err != nil {
		return rec, false
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		m.cfg.Logger.Warn("unreadable container records: the pod's containers start afresh", "pod", uid, "err", err)
		return rec, false
	}
	return rec, true
}

// recordedInstances are the runc ids and bundle directory names of the instances
// recorded for the pods in keep: Cleanup leaves them to be adopted.
func (m *Manager) recordedInstances(keep map[types.UID]bool) map[string]bool {
	live := map[string]bool{}
	for uid := range keep {
		rec, ok := m.loadPodRecord(uid)
		if !ok {
			continue
		}
		for _, c := range rec.Containers {
			if in := c.Instance; in != nil {
				live[in.ID], live[filepath.Base(in.Dir)] = true, true
			}
		}
		if sb := rec.PIDSandbox; sb != nil {
			live[sb.ID], live[filepath.Base(sb.Dir)] = true, true
		}
	}
	return live
}

// adopt takes over what an earlier agent left of a pod seen for the first time: the
// restart counts and last states of its containers, and the instances the shim still
// runs, whose probes start again. An instance the shim no longer has is killed and
// ends with 137, to be restarted by its policy. It reports whether any instance runs,
// in which case the pod's sandbox is kept as it is. ps.mu is held.
func (m *Manager) adopt(ctx context.Context, ps *podState) bool {
	rec, ok := m.loadPodRecord(ps.pod.UID)
	if !ok {
		return false
	}
	// The probes of adopted instances dial the pod's address, recorded with its
	// sandbox, which ensureSandbox keeps.
	m.mu.Lock()
	sbRec, hasSandbox := m.records[ps.pod.UID]
	m.mu.Unlock()
	if ip, err := netip.ParseAddr(sbRec.IP); hasSandbox && err == nil {
		ps.ip = ip
	} else if !ps.pod.Spec.HostNetwork {
		return false
	} else {
		ps.ip = m.node.Underlay
	}
	running := map[string]shim.Container{}
	list, err := m.cfg.Shim.List(ctx)
	if err != nil {
		m.cfg.Logger.Warn("listing the shim's containers: the pod's containers start afresh", "pod", podID(ps.pod), "err", err)
	}
	for _, sc := range list {
		running[sc.ID] = sc
	}
	adopted := false
	if sb := rec.PIDSandbox; sb != nil {
		if sc, ok := running[sb.ID]; ok && !sc.Exited {
			ps.pidSandbox = m.watchPIDSandbox(sb.ID, sb.Dir, sb.PID)
		} else {
			m.dropInstance(sb.ID, sb.Dir)
		}
	}
	for _, r := range rec.Containers {
		c := ps.container(r.Name, r.Init)
		if r.Ephemeral {
			c = ps.ephemeral(r.Name)
		}
		c.image, c.imageID, c.id, c.restartCount, c.started = r.Image, r.ImageID, r.ID, r.RestartCount, r.Started
		c.term, c.prevTerm, c.created = r.Term, r.PrevTerm, true
		in := r.Instance
		if in == nil {
			continue
		}
		spec := containerSpec(ps.pod, r.Name)
		sc, ok := running[in.ID]
		if !ok || spec == nil || (ps.pidSandbox == nil && ps.pod.Spec.ShareProcessNamespace != nil && *ps.pod.Spec.ShareProcessNamespace) {
			m.cfg.Logger.Warn("a recorded container is gone from the shim: it counts as ended", "pod", podID(ps.pod), "container", r.Name, "id", in.ID)
			m.dropInstance(in.ID, in.Dir)
			now := metav1.NewTime(m.cfg.Clock.Now())
			c.prevTerm = c.term
			c.term = &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: metav1.NewTime(r.StartedAt), FinishedAt: now,
				Message: "the container was lost while its node agent was away", ContainerID: status.ContainerIDPrefix + in.ID}
			continue
		}
		var oci specs.Spec
		if data, err := os.ReadFile(filepath.Join(in.Dir, "config.json")); err == nil {
			err = json.Unmarshal(data, &oci)
		}
		if oci.Process == nil {
			m.dropInstance(in.ID, in.Dir)
			continue
		}
		pctx, stop := context.WithCancel(ps.ctx)
		inst := &instance{id: in.ID, initPID: sc.InitPID, process: *oci.Process, dir: in.Dir, cgroup: in.Cgroup,
			stopSignal: syscall.Signal(in.StopSignal), logPath: in.LogPath, termLog: in.TermLog, done: make(chan struct{}), stop: stop}
		c.inst, c.startedAt, c.term = inst, r.StartedAt, nil
		// Ready as the earlier agent last saw it, until the restarted readiness probe
		// says otherwise: an agent restart does not take the pod out of its Services.
		c.ready = r.Ready || spec.ReadinessProbe == nil
		go m.wait(ps, c, inst, spec)
		m.startProbes(pctx, ps, c, inst, spec)
		adopted = true
		m.cfg.Logger.Info("adopted a running container", "pod", podID(ps.pod), "container", r.Name, "id", in.ID)
	}
	m.saveContainers(ps)
	return adopted
}

// dropInstance kills and removes an instance that cannot be adopted.
func (m *Manager) dropInstance(id, dir string) {
	ctx := context.Background()
	_ = m.runc.Kill(ctx, id, syscall.SIGKILL)
	if err := m.runc.Delete(ctx, id); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.cfg.Logger.Debug("deleting a container that cannot be adopted", "id", id, "err", err)
	}
	_ = m.cfg.Shim.Forget(ctx, id)
	m.removeBundle(dir)
}

// containerSpec is the pod's container, init container or ephemeral container named
// name.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	for _, ec := range pod.Spec.EphemeralContainers {
		if ec.Name == name {
			c := v1.Container(ec.EphemeralContainerCommon)
			return &c
		}
	}
	return nil
}
