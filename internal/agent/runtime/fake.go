package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/agent/status"
)

// Fake is an in-memory Runtime for the agent's tests: SyncPod reports every container
// running, started and ready with a fixed address, unless View says otherwise; KillPod
// forgets the pod; Exec answers through ExecFunc. It validates like the real one (a pod
// bound elsewhere, a killed pod, an unknown container).
type Fake struct {
	// PodIP is the address every pod gets (10.244.0.2 when empty).
	PodIP    string
	NodeName string
	// View, when set, replaces the computed view of a pod.
	View func(pod *v1.Pod) status.PodView
	// ExecFunc answers Exec (exit code 0 and no output when nil).
	ExecFunc func(pod types.UID, container string, cmd []string, stdout io.Writer) int

	mu     sync.Mutex
	pods   map[types.UID]*v1.Pod
	killed map[types.UID]bool
	// Synced and Killed record the calls, in order.
	Synced  []types.UID
	Killed  []types.UID
	changes chan types.UID
}

var _ Runtime = (*Fake)(nil)

// NewFake returns a Fake for node.
func NewFake(node string) *Fake {
	return &Fake{NodeName: node, pods: map[types.UID]*v1.Pod{}, killed: map[types.UID]bool{}, changes: make(chan types.UID, 1024)}
}

// SyncPod implements Runtime.
func (f *Fake) SyncPod(ctx context.Context, pod *v1.Pod, volumes map[string]string) (status.PodView, error) {
	if pod == nil {
		return status.PodView{}, errors.New("sync: no pod given")
	}
	if pod.Spec.NodeName != f.NodeName {
		return status.PodView{}, fmt.Errorf("sync pod %s/%s: bound to node %q, not %q", pod.Namespace, pod.Name, pod.Spec.NodeName, f.NodeName)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Synced = append(f.Synced, pod.UID)
	if f.killed[pod.UID] {
		return status.PodView{Terminal: true}, nil
	}
	f.pods[pod.UID] = pod.DeepCopy()
	if f.View != nil {
		return f.View(pod), nil
	}
	ip := f.PodIP
	if ip == "" {
		ip = "10.244.0.2"
	}
	v := status.PodView{SandboxReady: true, PodIPs: []string{ip}, Containers: map[string]status.ContainerView{}, InitContainers: map[string]status.ContainerView{}}
	for _, c := range pod.Spec.InitContainers {
		v.InitContainers[c.Name] = status.ContainerView{ID: string(pod.UID) + "-" + c.Name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}}
	}
	for _, c := range pod.Spec.Containers {
		v.Containers[c.Name] = status.ContainerView{ID: string(pod.UID) + "-" + c.Name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, Started: true, Ready: true}
	}
	return v, nil
}

// KillPod implements Runtime.
func (f *Fake) KillPod(ctx context.Context, pod *v1.Pod, gracePeriod time.Duration) error {
	if pod == nil {
		return errors.New("kill: no pod given")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Killed = append(f.Killed, pod.UID)
	f.killed[pod.UID] = true
	delete(f.pods, pod.UID)
	return nil
}

// LogPath implements Runtime; the Fake has no logs.
func (f *Fake) LogPath(podUID types.UID, container string, previous bool) (string, error) {
	return "", fmt.Errorf("container %q in pod %s has no logs", container, podUID)
}

// Exec implements Runtime.
func (f *Fake) Exec(ctx context.Context, podUID types.UID, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	f.mu.Lock()
	pod := f.pods[podUID]
	f.mu.Unlock()
	if pod == nil {
		return -1, fmt.Errorf("exec in pod %s: pod not found", podUID)
	}
	found := false
	for _, c := range pod.Spec.Containers {
		found = found || c.Name == container
	}
	if !found {
		return -1, fmt.Errorf("exec in container %q of pod %s: container not running", container, podUID)
	}
	if f.ExecFunc == nil {
		return 0, nil
	}
	return f.ExecFunc(podUID, container, cmd, stdout), nil
}

// Changes implements Runtime.
func (f *Fake) Changes() <-chan types.UID { return f.changes }

// Notify sends uid on Changes, as a process exit would.
func (f *Fake) Notify(uid types.UID) {
	select {
	case f.changes <- uid:
	default:
	}
}

// Cleanup implements Runtime: it forgets pods not in keep.
func (f *Fake) Cleanup(ctx context.Context, keep map[types.UID]bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid := range f.pods {
		if !keep[uid] {
			delete(f.pods, uid)
		}
	}
	return nil
}
