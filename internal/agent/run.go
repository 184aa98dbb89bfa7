package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/agent/node"
	"github.com/tranche/tranche/internal/agent/runtime"
	"github.com/tranche/tranche/internal/agent/volumes"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/events"
	"github.com/tranche/tranche/internal/proxy"
)

// NodeConfig is what `tranche agent` runs with.
type NodeConfig struct {
	NodeName, Zone string
	// ClusterFile is the cluster state `tranche up` writes (DATA/cluster.json).
	ClusterFile string
	// RootDir holds this node's pods; PVRoot the local PersistentVolumes.
	RootDir, PVRoot string
	SelfExe         string
	ClusterDNS      []string
	ClusterDomain   string
	Client          kubernetes.Interface
	Lookup          runtime.Lookup
	Logger          *slog.Logger
	// ServiceCIDR is the ClusterIP range the node's service proxy serves.
	ServiceCIDR netip.Prefix
}

// clusterState is the part of DATA/cluster.json the agent reads.
type clusterState struct {
	Topology clusternet.Topology `json:"topology"`
}

// RunNode runs a node until ctx ends: it registers the Node (with the podCIDR the
// cluster network gave it), keeps its Lease, removes sandboxes left by an earlier run,
// and runs the pods bound to it.
func RunNode(ctx context.Context, cfg NodeConfig) error {
	data, err := os.ReadFile(cfg.ClusterFile)
	if err != nil {
		return fmt.Errorf("--cluster-file: %w", err)
	}
	var st clusterState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("--cluster-file %s: %w", cfg.ClusterFile, err)
	}
	me, ok := st.Topology.Node(cfg.NodeName)
	if !ok {
		return fmt.Errorf("node %q is not in %s", cfg.NodeName, cfg.ClusterFile)
	}
	log := cfg.Logger
	nodeAgent := node.New(node.Config{Name: cfg.NodeName, InternalIP: me.Underlay.String(), Zone: cfg.Zone,
		PodCIDR: me.PodCIDR.String(), Logger: log}, cfg.Client)
	if _, err := nodeAgent.Register(ctx); err != nil {
		return err
	}
	proxyRunner, err := proxy.NewRunner(proxy.RunConfig{
		Config: proxy.Config{NodeName: cfg.NodeName, Zone: cfg.Zone, ClusterCIDR: st.Topology.ClusterCIDR,
			ServiceCIDR: cfg.ServiceCIDR, PodCIDR: me.PodCIDR},
		NodeIP: me.Underlay, Client: cfg.Client, Logger: log.With("component", "proxy")})
	if err != nil {
		return err
	}
	go func() {
		if err := proxyRunner.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("service proxy stopped", "err", err)
		}
	}()
	rt, err := runtime.New(runtime.Config{NodeName: cfg.NodeName, Topology: st.Topology, RootDir: cfg.RootDir, SelfExe: cfg.SelfExe,
		ClusterDNS: cfg.ClusterDNS, ClusterDomain: cfg.ClusterDomain, Lookup: cfg.Lookup, Logger: log.With("component", "runtime")})
	if err != nil {
		return err
	}
	pods, err := cfg.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()})
	if err != nil {
		return fmt.Errorf("listing the node's pods: %w", err)
	}
	keep := map[types.UID]bool{}
	for _, p := range pods.Items {
		keep[p.UID] = true
	}
	if err := rt.Cleanup(ctx, keep); err != nil {
		log.Warn("removing sandboxes of an earlier run", "err", err)
	}
	vols := volumes.New(volumes.Config{Client: cfg.Client, RootDir: cfg.RootDir, PVRoot: cfg.PVRoot, NodeName: cfg.NodeName,
		Logger: log.With("component", "volumes")})
	loop := NewPods(Config{NodeName: cfg.NodeName, Client: cfg.Client, Runtime: rt, Volumes: vols,
		Recorder: events.NewRecorder(ctx, cfg.Client, "kubelet"), Logger: log.With("component", "pods"), Effective: effectivePod})
	go nodeAgent.Run(ctx)
	go refreshVolumes(ctx, vols, log)
	log.Info("node running", "podCIDR", me.PodCIDR.String(), "address", me.Underlay.String())
	loop.Run(ctx, 4)
	return nil
}

// effectivePod adds what Kubernetes' ServiceAccount admission would have: the
// "default" account and the kube-api-access projected volume mounted in every container.
func effectivePod(pod *v1.Pod) *v1.Pod {
	out := pod.DeepCopy()
	if out.Spec.ServiceAccountName == "" {
		out.Spec.ServiceAccountName = "default"
	}
	vol, mount, ok := volumes.ServiceAccountVolume(out)
	if !ok {
		return out
	}
	out.Spec.Volumes = append(out.Spec.Volumes, vol)
	for i := range out.Spec.Containers {
		out.Spec.Containers[i].VolumeMounts = append(out.Spec.Containers[i].VolumeMounts, mount)
	}
	for i := range out.Spec.InitContainers {
		out.Spec.InitContainers[i].VolumeMounts = append(out.Spec.InitContainers[i].VolumeMounts, mount)
	}
	return out
}

// refreshVolumes keeps ConfigMap, Secret and token contents current, as kubelet's
// periodic volume sync does.
func refreshVolumes(ctx context.Context, vols *volumes.Manager, log *slog.Logger) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := vols.Refresh(ctx); err != nil && ctx.Err() == nil {
				log.Warn("refreshing volumes", "err", err)
			}
		}
	}
}
