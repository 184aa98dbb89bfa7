// Package node registers the agent's Node, keeps its Lease renewed and its status
// current, as the kubelet does, so the scheduler and the node lifecycle controller see
// a live node.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Timings of the kubelet: a lease renewed every 10 s and valid 40 s, the status
// reported when it changes and at least every minute.
const (
	LeaseDuration  = 40 * time.Second
	RenewInterval  = 10 * time.Second
	StatusInterval = time.Minute
	MaxPods        = 110
	KubeletPort    = 10250
	LeaseNamespace = "kube-node-lease"
	labelHostname  = "kubernetes.io/hostname"
	labelOS        = "kubernetes.io/os"
	labelArch      = "kubernetes.io/arch"
	labelZone      = "topology.kubernetes.io/zone"
	labelRegion    = "topology.kubernetes.io/region"
	trancheRegion  = "tranche"
)

// Config describes the node the agent runs as.
type Config struct {
	Name string
	// InternalIP is the node's underlay address.
	InternalIP string
	// Zone becomes topology.kubernetes.io/zone when set.
	Zone string
	// PodCIDR, when set, is registered as the node's spec.podCIDR (the local cluster's
	// network is laid out before the nodes register, so the subnet is known).
	PodCIDR string
	// Labels are extra labels set at registration.
	Labels map[string]string
	// CPU and Memory are the capacity reported; zero means the machine's.
	CPU    int64
	Memory int64
	// Version is reported as kubeletVersion.
	Version string
	Clock   clock.WithTicker
	Logger  *slog.Logger
}

// Desired returns the Node object to register.
func Desired(cfg Config, now time.Time) *v1.Node {
	labels := map[string]string{labelHostname: cfg.Name, labelOS: runtime.GOOS, labelArch: runtime.GOARCH}
	if cfg.Zone != "" {
		labels[labelZone] = cfg.Zone
		labels[labelRegion] = trancheRegion
	}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: labels,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec:   podCIDRSpec(cfg.PodCIDR),
		Status: Status(cfg, nil, now),
	}
}

func podCIDRSpec(cidr string) v1.NodeSpec {
	if cidr == "" {
		return v1.NodeSpec{}
	}
	return v1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}}
}

// Status computes the node's status; prev keeps lastTransitionTime of conditions that
// did not change.
func Status(cfg Config, prev *v1.NodeStatus, now time.Time) v1.NodeStatus {
	cpu := cfg.CPU
	if cpu == 0 {
		cpu = int64(runtime.NumCPU())
	}
	mem := cfg.Memory
	if mem == 0 {
		mem = memTotal()
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(cpu, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(mem, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(MaxPods, resource.DecimalSI),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	keepExtendedResources(capacity, prev)
	t := metav1.NewTime(now)
	conds := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	for i := range conds {
		conds[i].LastHeartbeatTime = t
		conds[i].LastTransitionTime = t
		if prev != nil {
			for _, p := range prev.Conditions {
				if p.Type == conds[i].Type && p.Status == conds[i].Status {
					conds[i].LastTransitionTime = p.LastTransitionTime
				}
			}
		}
	}
	version := cfg.Version
	if version == "" {
		version = "v1.37.2"
	}
	return v1.NodeStatus{
		Capacity:        capacity,
		Allocatable:     capacity.DeepCopy(),
		Conditions:      conds,
		Addresses:       []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: cfg.InternalIP}, {Type: v1.NodeHostName, Address: cfg.Name}},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: KubeletPort}},
		NodeInfo: v1.NodeSystemInfo{
			KubeletVersion: version, KubeProxyVersion: version, ContainerRuntimeVersion: "tranche://" + version,
			OSImage: osImage(), KernelVersion: kernelVersion(), OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			MachineID: readTrim("/etc/machine-id"), BootID: readTrim("/proc/sys/kernel/random/boot_id"), SystemUUID: cfg.Name,
		},
	}
}

// Agent keeps a Node registered and alive.
type Agent struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger
	// images and reportedImages: status.images (images.go).
	images         ImageLister
	reportedImages []v1.ContainerImage
	// contact is when the agent last reached the API server (UnixNano): its last
	// registration or lease renewal that succeeded, its creation before any.
	contact atomic.Int64
}

// New returns an agent for cfg.
func New(cfg Config, client kubernetes.Interface) *Agent {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Agent{cfg: cfg, client: client, log: cfg.Logger}
	a.contact.Store(cfg.Clock.Now().UnixNano())
	return a
}

// LastContact returns when the agent last reached the API server: its last
// registration or lease renewal that succeeded (its creation before any). The node
// lifecycle controller judges the node by the same renewals: once they stop for its
// grace period, the node is no longer Ready.
func (a *Agent) LastContact() time.Time { return time.Unix(0, a.contact.Load()) }

// heard records a request that reached the API server and was answered, sent at sent
// (registration, then the renewals one after the other: never two at once).
func (a *Agent) heard(sent time.Time) { a.contact.Store(sent.UnixNano()) }

// Register creates the Node, or brings an existing one's labels and status up to date
// (a restarted agent keeps its Node and podCIDR).
func (a *Agent) Register(ctx context.Context) (*v1.Node, error) {
	sent := a.cfg.Clock.Now()
	n, err := a.register(ctx)
	if err == nil {
		a.heard(sent)
	}
	return n, err
}

func (a *Agent) register(ctx context.Context) (*v1.Node, error) {
	want := Desired(a.cfg, a.cfg.Clock.Now())
	n, err := a.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		n, err = a.client.CoreV1().Nodes().Get(ctx, a.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		changed := false
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			if n.Labels[k] != v {
				n.Labels[k], changed = v, true
			}
		}
		if changed {
			if n, err = a.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return nil, err
			}
		}
	} else if err != nil {
		return nil, fmt.Errorf("registering node %s: %w", a.cfg.Name, err)
	}
	return a.updateStatus(ctx, n)
}

// updateStatus writes the node's status, re-reading the Node when a controller
// (node IPAM, lifecycle) changed it in between.
func (a *Agent) updateStatus(ctx context.Context, n *v1.Node) (*v1.Node, error) {
	var out *v1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		st := Status(a.cfg, &n.Status, a.cfg.Clock.Now())
		next := n.DeepCopy()
		next.Status.Capacity, next.Status.Allocatable, next.Status.Conditions = st.Capacity, st.Allocatable, st.Conditions
		next.Status.Addresses, next.Status.NodeInfo, next.Status.DaemonEndpoints = st.Addresses, st.NodeInfo, st.DaemonEndpoints
		a.withImages(next)
		var err error
		out, err = a.client.CoreV1().Nodes().UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := a.client.CoreV1().Nodes().Get(ctx, a.cfg.Name, metav1.GetOptions{}); gerr == nil {
				n = fresh
			}
		}
		return err
	})
	return out, err
}

// Run renews the Lease every RenewInterval and reports status every StatusInterval
// until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	renew := a.cfg.Clock.NewTicker(RenewInterval)
	defer renew.Stop()
	lastStatus := a.cfg.Clock.Now()
	_ = a.renewLease(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C():
		}
		if err := a.renewLease(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("renewing node lease", "node", a.cfg.Name, "err", err)
		}
		if a.cfg.Clock.Since(lastStatus) >= StatusInterval || a.notReadyInAPI(ctx) || a.imagesChanged() {
			n, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.Name, metav1.GetOptions{})
			if err == nil {
				_, err = a.updateStatus(ctx, n)
			}
			if err != nil && ctx.Err() == nil {
				a.log.Warn("updating node status", "node", a.cfg.Name, "err", err)
				continue
			}
			lastStatus = a.cfg.Clock.Now()
		}
	}
}

// notReadyInAPI reports whether the API shows the node not Ready (the lifecycle
// controller marked it Unknown while the agent was away): the agent corrects it at once.
func (a *Agent) notReadyInAPI(ctx context.Context) bool {
	n, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status != v1.ConditionTrue
		}
	}
	return true
}

// renewLease renews the node's Lease and, when it succeeded, records the contact.
func (a *Agent) renewLease(ctx context.Context) error {
	sent := a.cfg.Clock.Now()
	err := a.writeLease(ctx, sent)
	if err == nil {
		a.heard(sent)
	}
	return err
}

func (a *Agent) writeLease(ctx context.Context, at time.Time) error {
	leases := a.client.CoordinationV1().Leases(LeaseNamespace)
	now := metav1.NewMicroTime(at)
	l, err := leases.Get(ctx, a.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, nerr := a.client.CoreV1().Nodes().Get(ctx, a.cfg.Name, metav1.GetOptions{})
		if nerr != nil {
			return nerr
		}
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Name, Namespace: LeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(a.cfg.Name),
				LeaseDurationSeconds: ptr.To(int32(LeaseDuration / time.Second)), RenewTime: &now},
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	want := l.DeepCopy()
	want.Spec.RenewTime = &now
	want.Spec.HolderIdentity = ptr.To(a.cfg.Name)
	want.Spec.LeaseDurationSeconds = ptr.To(int32(LeaseDuration / time.Second))
	if apiequality.Semantic.DeepEqual(want, l) {
		return nil
	}
	_, err = leases.Update(ctx, want, metav1.UpdateOptions{})
	return err
}

func readTrim(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func osImage() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "Linux"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

func kernelVersion() string { return readTrim("/proc/sys/kernel/osrelease") }

func memTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}
