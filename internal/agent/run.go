package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/agent/node"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/agent/runtime"
	"github.com/tranche/tranche/internal/agent/shim"
	"github.com/tranche/tranche/internal/agent/stream"
	"github.com/tranche/tranche/internal/agent/volumes"
	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/events"
	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/imagestore"
	"github.com/tranche/tranche/internal/netpol"
	"github.com/tranche/tranche/internal/nftsession"
	"github.com/tranche/tranche/internal/proxy"
	"github.com/tranche/tranche/internal/registries"
)

// NodeConfig is what `tranche agent` runs with.
type NodeConfig struct {
	NodeName, Zone string
	// ClusterFile is the cluster state `tranche up` writes (DATA/cluster.json). Empty
	// means a machine of its own (machineTopology): the network namespace the agent runs
	// in is the node, at NodeIP, with the podCIDR node IPAM gives it from ClusterCIDR;
	// the host's root namespace only with TakeHostNetwork.
	ClusterFile     string
	NodeIP          netip.Addr
	ClusterCIDR     netip.Prefix
	TakeHostNetwork bool
	// RootDir holds this node's pods; PVRoot the local PersistentVolumes; ImageDir the
	// host's image store, shared by the nodes of a local cluster.
	RootDir, PVRoot, ImageDir string
	// SelfExe is the tranche binary, which the catalog's agnhost, pause and tranche
	// images carry.
	SelfExe       string
	ClusterDNS    []string
	ClusterDomain string
	Client        kubernetes.Interface
	Lookup        runtime.Lookup
	// ServiceCIDR is the ClusterIP range the node's service proxy serves.
	ServiceCIDR netip.Prefix
	// ProxyMode is the service proxy's mode (proxy.ModeNFTables when empty) and
	// IPVSScheduler its scheduler in mode ipvs.
	ProxyMode, IPVSScheduler string
	// Logs is the container log rotation (kubelet's defaults when zero).
	Logs shim.LogPolicy
	// PodMaxPids is the pids.max of each pod's cgroup (kubelet's --pod-max-pids);
	// 0 or less sets none.
	PodMaxPids int64
	// ImageGC is the policy of the image garbage collection (kubelet's), which runs every
	// ImageGCPeriod (node.ImageGCPeriod when 0).
	ImageGC       imagestore.GCPolicy
	ImageGCPeriod time.Duration
	// ClientCA (PEM) is the cluster CA: the streaming endpoint (logs, exec, attach,
	// port-forward on the node's address, port 10250) accepts the API server's client
	// certificate from it. Empty means no endpoint.
	ClientCA []byte
	// Registries is the registries configuration (mirrors, TLS, credentials); nil
	// pulls every image from its own registry.
	Registries *registries.Config
	// Backend routes the other nodes' pod subnets (internal/overlay): vxlan, host-gw,
	// or none (empty) when `tranche up` does. NetworkClient (nil: Client) is its
	// identity, which may read every Node (bootstrap.NodeNetworkUser).
	Backend       string
	NetworkClient kubernetes.Interface
	Logger        *slog.Logger
	// Ready (may be nil) is closed once the node is registered, its caches are filled
	// and its pod loop is about to start.
	Ready chan<- struct{}
}

// clusterState is the part of DATA/cluster.json the agent reads.
type clusterState struct {
	Topology clusternet.Topology `json:"topology"`
}

// apiContactTimeout is how long the node may go without reaching the API server (its
// lease renewals, node.Agent.LastContact) before it stops announcing load-balancer
// addresses: two missed renewals. The node lifecycle controller takes it for gone
// after its grace period (50 s by default, at least 40 s in Kubernetes' advice) since
// the last renewal, and only then chooses another node for the addresses; this node
// releases them 20-25 s after its last renewal (the announcer looks every 5 s).
const apiContactTimeout = 2 * node.RenewInterval

// RunNode runs a node until ctx ends: it registers the Node (with the podCIDR the
// cluster network gave it), keeps its Lease, removes sandboxes left by an earlier run,
// and runs the pods bound to it.
func RunNode(ctx context.Context, cfg NodeConfig) error {
	log := cfg.Logger
	// What must finish its work before the agent exits (the load-balancer announcer
	// releasing its addresses, so another node takes them over) runs in bg; it ends
	// with ctx, which also ends on an early return.
	var bg sync.WaitGroup
	defer bg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var st clusterState
	if cfg.ClusterFile == "" {
		t, err := machineTopology(ctx, cfg, log)
		if err != nil {
			return err
		}
		st.Topology = t
	} else {
		data, err := os.ReadFile(cfg.ClusterFile)
		if err != nil {
			return fmt.Errorf("--cluster-file: %w", err)
		}
		if err := json.Unmarshal(data, &st); err != nil {
			return fmt.Errorf("--cluster-file %s: %w", cfg.ClusterFile, err)
		}
	}
	me, ok := st.Topology.Node(cfg.NodeName)
	if !ok {
		return fmt.Errorf("node %q is not in %s", cfg.NodeName, cfg.ClusterFile)
	}
	nodeAgent := node.New(node.Config{Name: cfg.NodeName, InternalIP: me.Underlay.String(), Zone: cfg.Zone,
		PodCIDR: me.PodCIDR.String(), Logger: log}, cfg.Client)
	inContact := func() bool { return time.Since(nodeAgent.LastContact()) < apiContactTimeout }
	var err error
	if st.Topology, err = startOverlay(ctx, &bg, cfg.Backend, st.Topology, me, cfg.Client, cfg.NetworkClient, inContact, log); err != nil {
		return err
	}
	// One registry for the proxy and the policy enforcement: the proxy's metrics
	// listener (127.0.0.1:10249) serves both.
	metrics := prometheus.NewRegistry()
	proxyRunner, err := proxy.NewRunner(proxy.RunConfig{
		Config: proxy.Config{NodeName: cfg.NodeName, Zone: cfg.Zone, ClusterCIDR: st.Topology.ClusterCIDR,
			ServiceCIDR: cfg.ServiceCIDR, NodeIP: me.Underlay},
		Mode: cfg.ProxyMode, IPVSScheduler: cfg.IPVSScheduler,
		Client: cfg.Client, Logger: log.With("component", "proxy"), Metrics: metrics,
		Recorder: proxy.NewEventRecorder(ctx, cfg.Client, cfg.NodeName)})
	if err != nil {
		return err
	}
	// The agent runs in its node's network namespace: the kernel's nftables there.
	policyNFT, err := nftsession.New(knftables.IPv4Family, netpol.TableName)
	if err != nil {
		return fmt.Errorf("network policies: nftables table %s: %w", netpol.TableName, err)
	}
	policyRunner, err := netpol.NewRunner(netpol.RunnerConfig{NodeName: cfg.NodeName, NodeIP: me.Underlay,
		ClusterCIDR: st.Topology.ClusterCIDR, ServiceCIDR: cfg.ServiceCIDR, Client: cfg.Client,
		Logger: log.With("component", "netpol"), Metrics: metrics,
		NFT: policyNFT, LoadFullSyncs: netpol.LoadWithNFT})
	if err != nil {
		return err
	}
	// Registered once the proxy could be prepared: a node whose proxy mode cannot run
	// here (a missing package or kernel module) fails before it is ever Ready.
	if _, err := nodeAgent.Register(ctx); err != nil {
		return err
	}
	go func() {
		if err := proxyRunner.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("service proxy stopped", "err", err)
		}
	}()
	go func() {
		if err := proxy.RunHostPorts(ctx, cfg.Client, cfg.NodeName, log.With("component", "hostport")); err != nil && ctx.Err() == nil {
			log.Error("hostPort mapping stopped", "err", err)
		}
	}()
	bg.Go(func() {
		defer policyNFT.Close()
		if err := policyRunner.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("network policy enforcement stopped", "err", err)
		}
	})
	services, err := serviceCache(ctx, cfg.Client)
	if err != nil {
		return err
	}
	recorder := events.NewRecorder(ctx, cfg.Client, "kubelet")
	store, err := imagestore.Open(cfg.ImageDir)
	if err != nil {
		return fmt.Errorf("opening the image store: %w", err)
	}
	imgs := images.New(store, imagebuild.Source{SelfExe: cfg.SelfExe, Pause: imagebuild.EmbeddedPause()},
		images.WithRegistries(cfg.Registries), images.WithSecrets(pullSecrets(cfg.Client)))
	nodeAgent.SetImages(node.StoreImages(store))
	go node.RunImageGC(ctx, node.ImageGC{Node: cfg.NodeName, Store: store, Policy: cfg.ImageGC, Period: cfg.ImageGCPeriod, Recorder: recorder, Logger: log.With("component", "imagegc")})
	// The node's shim runs its containers and outlives this agent: a new agent finds
	// it (and them) again.
	shimDir := filepath.Join(cfg.RootDir, "shim")
	runcRoot := filepath.Join(cfg.RootDir, "runc")
	shimCmd := exec.Command(cfg.SelfExe, "shim", "--dir", shimDir, "--runc-root", runcRoot)
	shimCmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if f, err := os.OpenFile(filepath.Join(cfg.RootDir, "shim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		defer f.Close()
		shimCmd.Stdout, shimCmd.Stderr = f, f
	}
	shimClient, err := shim.Ensure(ctx, shimDir, shimCmd)
	if err != nil {
		return err
	}
	runcBin, err := runc.Find()
	if err != nil {
		return err
	}
	rt, err := runtime.New(runtime.Config{Shim: shimClient, Runc: &runc.Runtime{Binary: runcBin, Root: runcRoot, Logger: log.With("component", "runc")}, Recorder: recorder, Services: services, NodeName: cfg.NodeName, Topology: st.Topology, RootDir: cfg.RootDir, Images: imgs,
		ClusterDNS: cfg.ClusterDNS, ClusterDomain: cfg.ClusterDomain, Lookup: cfg.Lookup, Logs: cfg.Logs, PodPidsLimit: cfg.PodMaxPids, Logger: log.With("component", "runtime")})
	if err != nil {
		return err
	}
	if len(cfg.ClientCA) > 0 {
		if err := startStream(ctx, cfg, rt, me.Underlay.String(), log); err != nil {
			return err
		}
	} else {
		log.Warn("no cluster CA to check the API server's certificate against: logs, exec, attach and port-forward are off on this node")
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
		Recorder: recorder, Logger: log.With("component", "pods"), Effective: effectivePod})
	go nodeAgent.Run(ctx)
	go refreshVolumes(ctx, vols, log)
	log.Info("node running", "podCIDR", me.PodCIDR.String(), "address", me.Underlay.String())
	if cfg.Ready != nil {
		close(cfg.Ready)
	}
	loop.Run(ctx, podWorkers)
	return nil
}

// podWorkers is how many pods the agent syncs at once. A sync can take long: a pod's
// graceful stop waits up to its grace period, a first start may build its image, and
// under CPU pressure `runc run` takes seconds; with few workers, pods queue behind those
// (kubelet has a worker per pod). More than the pods a node starts at once at 10 pods/s
// on 3 nodes, few enough that a burst does not run dozens of runc processes at a time.
const podWorkers = 16

// effectivePod adds what Kubernetes' ServiceAccount admission would have to a pod the
// API server stored before it ran that admission (no serviceAccountName): the "default"
// account and the kube-api-access projected volume mounted in every container. A pod
// naming its account went through it, which decided the volume (automountServiceAccountToken
// of the pod, then of the account), so it runs as it is.
func effectivePod(pod *v1.Pod) *v1.Pod {
	out := pod.DeepCopy()
	if out.Spec.ServiceAccountName != "" {
		return out
	}
	out.Spec.ServiceAccountName = "default"
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

// startStream serves the node's streaming endpoint, with the resource usage endpoints,
// on addr:10250 until ctx ends.
func startStream(ctx context.Context, cfg NodeConfig, rt *runtime.Manager, addr string, log *slog.Logger) error {
	usage, err := resourceStats(rt, cfg.NodeName, log.With("component", "stats"))
	if err != nil {
		return err
	}
	srv, err := stream.New(stream.Config{Runtime: rt, ClientCA: cfg.ClientCA, AllowedClients: []string{stream.APIServerClientName},
		Stats: usage, Logger: log.With("component", "stream")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(node.KubeletPort)))
	if err != nil {
		return fmt.Errorf("streaming endpoint: %w", err)
	}
	go func() {
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("streaming endpoint stopped", "err", err)
		}
	}()
	return nil
}

// serviceCache is an informer cache of the cluster's Services, for the variables kubelet
// gives containers; it is filled before any pod starts, so the first containers get them
// too.
func serviceCache(ctx context.Context, client kubernetes.Interface) (runtime.Services, error) {
	factory := informers.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().Services().Lister()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("waiting for the %v cache: %w", typ, context.Cause(ctx))
		}
	}
	return func() ([]*v1.Service, error) { return lister.List(labels.Everything()) }, nil
}

// pullSecrets reads pods' imagePullSecrets with the node's credentials (the node
// authorizer allows the secrets its pods name).
func pullSecrets(client kubernetes.Interface) images.SecretGetter {
	return func(ctx context.Context, ns, name string) (*v1.Secret, error) {
		return client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}
}
