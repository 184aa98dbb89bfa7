package server

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	externalmetrics "k8s.io/metrics/pkg/client/external_metrics"

	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/controller/clusterroleaggregation"
	"github.com/tranche/tranche/internal/controller/cronjob"
	"github.com/tranche/tranche/internal/controller/daemonset"
	"github.com/tranche/tranche/internal/controller/deployment"
	"github.com/tranche/tranche/internal/controller/disruption"
	"github.com/tranche/tranche/internal/controller/endpoints"
	"github.com/tranche/tranche/internal/controller/endpointslice"
	"github.com/tranche/tranche/internal/controller/endpointslicemirroring"
	"github.com/tranche/tranche/internal/controller/flowcontrol"
	"github.com/tranche/tranche/internal/controller/gc"
	"github.com/tranche/tranche/internal/controller/hpa"
	"github.com/tranche/tranche/internal/controller/job"
	"github.com/tranche/tranche/internal/controller/localpv"
	"github.com/tranche/tranche/internal/controller/manager"
	"github.com/tranche/tranche/internal/controller/namespace"
	"github.com/tranche/tranche/internal/controller/netpolwatch"
	"github.com/tranche/tranche/internal/controller/nodeipam"
	"github.com/tranche/tranche/internal/controller/nodelifecycle"
	"github.com/tranche/tranche/internal/controller/perns"
	"github.com/tranche/tranche/internal/controller/podgc"
	"github.com/tranche/tranche/internal/controller/replicaset"
	"github.com/tranche/tranche/internal/controller/resourcequota"
	"github.com/tranche/tranche/internal/controller/servicecidr"
	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/controller/statefulset"
	"github.com/tranche/tranche/internal/events"
	"github.com/tranche/tranche/internal/leader"
	"github.com/tranche/tranche/internal/scheduler"
)

// controllerOptions are the settings of the control plane's controllers beyond the
// shared client and informers.
type controllerOptions struct {
	clusterCIDR   netip.Prefix
	lbPool        servicelb.Pool
	caPEM         []byte
	pvRoot        string
	hpaSyncPeriod time.Duration
	// nodeMonitorGrace is the node lifecycle controller's grace period (0: its default).
	nodeMonitorGrace time.Duration
	// signingDuration is the CSR signers' longest certificate life (0: DefaultClusterSigningDuration).
	signingDuration time.Duration
	// alloc is the Service allocator whose repair loop the controller manager runs
	// (nil: none).
	alloc *allocator.Services
}

// startControllers runs the controller manager and the scheduler in this process until
// ctx ends. Without leader election both start at once and it returns once every
// controller is constructed and started, or with the error of the first constructor
// that failed. With it, each runs only while this server holds its lease
// (kube-system/kube-controller-manager, kube-system/kube-scheduler) and it returns at
// once. stopped then yields the end: after ctx ends, once every controller's workers
// have returned. Metrics are registered on reg.
func startControllers(ctx context.Context, cfg *rest.Config, opts controllerOptions, election LeaderElection, reg prometheus.Registerer, log *slog.Logger) (stopped <-chan error, err error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	resourceMetrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// As kube-controller-manager: a discovery-backed RESTMapper forgotten every 30 s, so
	// that kinds served since are found, and the scale client over it.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(disc))
	go wait.UntilWithContext(ctx, func(context.Context) { mapper.Reset() }, 30*time.Second)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
	if err != nil {
		return nil, err
	}
	externalMetrics, err := externalmetrics.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	clients := apiClients{meta: meta, disc: disc, resourceMetrics: resourceMetrics, externalMetrics: externalMetrics, mapper: mapper, scales: scales}
	units := []electedUnit{
		{lease: leader.ControllerManagerLease, component: "kube-controller-manager",
			m: &manager.Manager{Client: client, Logger: log, Metrics: reg, Descriptors: append(controllerDescriptors(opts, clients), joinControllers(opts)...)}},
		{lease: leader.SchedulerLease, component: "default-scheduler",
			m: &manager.Manager{Client: client, Logger: log.With("component", "scheduler"), Descriptors: schedulerDescriptors()}},
	}
	if election.Enabled {
		return runElected(ctx, client, units, election, log)
	}
	return runUnelected(ctx, units)
}

// schedulerDescriptors is the scheduler, run as a manager of its own: it is elected
// through its own lease (kube-system/kube-scheduler), as kube-scheduler is.
func schedulerDescriptors() []manager.Descriptor {
	return []manager.Descriptor{
		{Name: "scheduler", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return scheduler.New(scheduler.Config{Client: c.Client, Informers: c.Informers, Recorder: events.NewRecorder(ctx, c.Client, "default-scheduler"),
				Logger: c.Logger}), nil
		}},
	}
}

// apiClients are the controllers' clients besides the typed clientset.
type apiClients struct {
	meta            metadata.Interface
	disc            discovery.DiscoveryInterface
	resourceMetrics metricsclient.Interface
	// externalMetrics reads external.metrics.k8s.io (HPAs' External metrics).
	externalMetrics externalmetrics.ExternalMetricsClient
	// mapper and scales read and write the scale subresource of any kind (the
	// disruption and HPA controllers' custom resources).
	mapper apimeta.RESTMapper
	scales scale.ScalesGetter
}

// externalMetricsOf is the HPA controller's reader of c (nil: none).
func externalMetricsOf(c externalmetrics.ExternalMetricsClient) hpa.ExternalMetricsClient {
	if c == nil {
		return nil
	}
	return hpa.NewExternalMetricsClient(c)
}

// controllerDescriptors lists every controller the manager runs, with its workers.
func controllerDescriptors(o controllerOptions, k apiClients) []manager.Descriptor {
	meta, disc, resourceMetrics := k.meta, k.disc, k.resourceMetrics
	recorder := func(ctx context.Context, c manager.Context, component string) record.EventRecorder {
		return events.NewRecorder(ctx, c.Client, component)
	}
	return []manager.Descriptor{
		{Name: "serviceaccount", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return perns.ServiceAccounts(c.Client, c.Informers, c.Logger), nil
		}},
		{Name: "root-ca-cert-publisher", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return perns.RootCA(c.Client, c.Informers, o.caPEM, c.Logger), nil
		}},
		{Name: "namespace", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(namespace.New(namespace.Config{Client: c.Client, Metadata: meta, Discovery: disc, Logger: c.Logger}), 2), nil
		}},
		{Name: "garbagecollector", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(gc.New(gc.Config{Metadata: meta, Discovery: disc, Logger: c.Logger}), 2), nil
		}},
		{Name: "endpointslice", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(endpointslice.New(endpointslice.Config{Client: c.Client, Informers: c.Informers, Logger: c.Logger,
				Recorder: recorder(ctx, c, "endpointslice-controller"), Registerer: c.Metrics}), 4), nil
		}},
		{Name: "endpoints", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(endpoints.New(endpoints.Config{Client: c.Client, Informers: c.Informers, Logger: c.Logger,
				Recorder: recorder(ctx, c, "endpoint-controller")}), 2), nil
		}},
		{Name: "networkpolicy-watch", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(netpolwatch.New(netpolwatch.Config{Informers: c.Informers, Logger: c.Logger,
				Recorder: recorder(ctx, c, "networkpolicy-controller")}), 1), nil
		}},
		{Name: "endpointslicemirroring", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(endpointslicemirroring.New(endpointslicemirroring.Config{Client: c.Client, Informers: c.Informers, Logger: c.Logger,
				Recorder: recorder(ctx, c, "endpointslicemirroring-controller")}), 2), nil
		}},
		{Name: "nodeipam", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return nodeipam.New(nodeipam.Config{Client: c.Client, Informers: c.Informers, ClusterCIDR: o.clusterCIDR,
				Recorder: recorder(ctx, c, "node-ipam-controller"), Logger: c.Logger}), nil
		}},
		{Name: "nodelifecycle", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return nodelifecycle.New(nodelifecycle.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "node-controller"), Logger: c.Logger, GracePeriod: o.nodeMonitorGrace}), nil
		}},
		{Name: "replicaset", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(replicaset.New(replicaset.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "replicaset-controller"), Logger: c.Logger}), 4), nil
		}},
		{Name: "replicationmanager", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(replicaset.NewReplicationManager(replicaset.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "replication-controller"), Logger: c.Logger}), 2), nil
		}},
		{Name: "disruption", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(disruption.New(disruption.Config{Client: c.Client, Informers: c.Informers, Scales: k.scales, Mapper: k.mapper,
				Recorder: recorder(ctx, c, "controllermanager"), Logger: c.Logger}), 1), nil
		}},
		{Name: "podgc", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return podgc.New(podgc.Config{Client: c.Client, Informers: c.Informers, Logger: c.Logger}), nil
		}},
		{Name: "deployment", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(deployment.New(deployment.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "deployment-controller"), Logger: c.Logger}), 4), nil
		}},
		{Name: "daemonset", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(daemonset.New(daemonset.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "daemonset-controller"), Logger: c.Logger}), 2), nil
		}},
		{Name: "statefulset", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(statefulset.New(statefulset.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "statefulset-controller"), Logger: c.Logger}), 2), nil
		}},
		{Name: "job", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(job.New(job.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "job-controller"), Logger: c.Logger}), 2), nil
		}},
		{Name: "cronjob", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(cronjob.New(cronjob.Config{Client: c.Client, Informers: c.Informers,
				Recorder: recorder(ctx, c, "cronjob-controller"), Logger: c.Logger}), 1), nil
		}},
		{Name: "horizontalpodautoscaling", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(hpa.New(hpa.Config{Client: c.Client, Informers: c.Informers, Metrics: hpa.NewMetricsClient(resourceMetrics),
				External: externalMetricsOf(k.externalMetrics), Scales: k.scales, Mapper: k.mapper,
				Recorder: recorder(ctx, c, "horizontal-pod-autoscaler"), SyncPeriod: o.hpaSyncPeriod, Logger: c.Logger}), 5), nil
		}},
		{Name: "localpv", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			if err := localpv.EnsureStorageClass(ctx, c.Client); err != nil {
				return nil, err
			}
			return localpv.New(localpv.Config{Client: c.Client, Informers: c.Informers, PVRoot: o.pvRoot, Logger: c.Logger,
				Recorder: recorder(ctx, c, "tranche.dev/local")}), nil
		}},
		{Name: "servicelb", Disabled: o.lbPool.Empty(), New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return servicelb.New(servicelb.Config{Client: c.Client, Informers: c.Informers, Pool: o.lbPool,
				Recorder: recorder(ctx, c, "service-lb-controller"), Logger: c.Logger}), nil
		}},
		{Name: "clusterrole-aggregation", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(clusterroleaggregation.New(clusterroleaggregation.Config{Client: c.Client, Informers: c.Informers, Logger: c.Logger}), 5), nil
		}},
		{Name: "service-allocator-repair", Disabled: o.alloc == nil, New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return allocator.NewRepairLoop(allocator.RepairLoopConfig{Alloc: o.alloc, Services: c.Informers.Core().V1().Services(),
				IPAddresses: c.Informers.Networking().V1().IPAddresses(), Recorder: recorder(ctx, c, "ipallocator-repair-controller"), Logger: c.Logger})
		}},
		{Name: "service-cidr-controller", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(servicecidr.New(servicecidr.Config{Client: c.Client, Informers: c.Informers, Logger: c.Logger}), 2), nil
		}},
		{Name: "flowschema-dangling", New: func(_ context.Context, c manager.Context) (manager.Controller, error) {
			return manager.Workers(flowcontrol.New(flowcontrol.Config{Client: c.Client, Informers: c.Informers, Logger: c.Logger}), 1), nil
		}},
		{Name: "resourcequota", New: func(ctx context.Context, c manager.Context) (manager.Controller, error) {
			return resourcequota.New(ctx, resourcequota.Config{Client: c.Client, Informers: c.Informers, Metadata: meta, Discovery: disc})
		}},
		validatingAdmissionPolicyStatus(disc),
	}
}
