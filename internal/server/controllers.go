package server

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/tranche/tranche/internal/controller/clusterroleaggregation"
	"github.com/tranche/tranche/internal/controller/cronjob"
	"github.com/tranche/tranche/internal/controller/daemonset"
	"github.com/tranche/tranche/internal/controller/deployment"
	"github.com/tranche/tranche/internal/controller/endpoints"
	"github.com/tranche/tranche/internal/controller/endpointslice"
	"github.com/tranche/tranche/internal/controller/endpointslicemirroring"
	"github.com/tranche/tranche/internal/controller/gc"
	"github.com/tranche/tranche/internal/controller/hpa"
	"github.com/tranche/tranche/internal/controller/job"
	"github.com/tranche/tranche/internal/controller/localpv"
	"github.com/tranche/tranche/internal/controller/namespace"
	"github.com/tranche/tranche/internal/controller/nodeipam"
	"github.com/tranche/tranche/internal/controller/nodelifecycle"
	"github.com/tranche/tranche/internal/controller/perns"
	"github.com/tranche/tranche/internal/controller/podgc"
	"github.com/tranche/tranche/internal/controller/replicaset"
	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/controller/statefulset"
	"github.com/tranche/tranche/internal/events"
	"github.com/tranche/tranche/internal/scheduler"
)

// startControllers starts the control-plane controllers in this process; they stop
// when ctx ends. Metrics are registered on reg. An empty lbPool leaves LoadBalancer
// Services to another implementation. HPAs are synced every hpaSyncPeriod (0: 15s).
func startControllers(ctx context.Context, cfg *rest.Config, clusterCIDR netip.Prefix, lbPool servicelb.Pool, caPEM []byte, pvRoot string, hpaSyncPeriod time.Duration, reg prometheus.Registerer, log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	sa := perns.ServiceAccounts(client, factory, log.With("controller", "serviceaccount"))
	rootCA := perns.RootCA(client, factory, caPEM, log.With("controller", "root-ca-cert-publisher"))
	ns := namespace.New(namespace.Config{Client: client, Metadata: meta, Discovery: disc, Logger: log.With("controller", "namespace")})
	collector := gc.New(gc.Config{Metadata: meta, Discovery: disc, Logger: log.With("controller", "garbagecollector")})
	slices := endpointslice.New(endpointslice.Config{Client: client, Informers: factory, Logger: log.With("controller", "endpointslice"),
		Recorder: events.NewRecorder(ctx, client, "endpointslice-controller"), Registerer: reg})
	eps := endpoints.New(endpoints.Config{Client: client, Informers: factory, Logger: log.With("controller", "endpoints"),
		Recorder: events.NewRecorder(ctx, client, "endpoint-controller")})
	mirror := endpointslicemirroring.New(endpointslicemirroring.Config{Client: client, Informers: factory,
		Logger: log.With("controller", "endpointslicemirroring"), Recorder: events.NewRecorder(ctx, client, "endpointslicemirroring-controller")})
	sched := scheduler.New(scheduler.Config{Client: client, Informers: factory, Recorder: events.NewRecorder(ctx, client, "default-scheduler"),
		Logger: log.With("component", "scheduler")})
	ipam := nodeipam.New(nodeipam.Config{Client: client, Informers: factory, ClusterCIDR: clusterCIDR,
		Recorder: events.NewRecorder(ctx, client, "node-ipam-controller"), Logger: log.With("controller", "nodeipam")})
	lifecycle := nodelifecycle.New(nodelifecycle.Config{Client: client, Informers: factory,
		Recorder: events.NewRecorder(ctx, client, "node-controller"), Logger: log.With("controller", "nodelifecycle")})
	rs := replicaset.New(replicaset.Config{Client: client, Informers: factory, Recorder: events.NewRecorder(ctx, client, "replicaset-controller"),
		Logger: log.With("controller", "replicaset")})
	rcm := replicaset.NewReplicationManager(replicaset.Config{Client: client, Informers: factory,
		Recorder: events.NewRecorder(ctx, client, "replication-controller"), Logger: log.With("controller", "replicationmanager")})
	pgc := podgc.New(podgc.Config{Client: client, Informers: factory, Logger: log.With("controller", "podgc")})
	deploy := deployment.New(deployment.Config{Client: client, Informers: factory, Recorder: events.NewRecorder(ctx, client, "deployment-controller"),
		Logger: log.With("controller", "deployment")})
	ds := daemonset.New(daemonset.Config{Client: client, Informers: factory, Recorder: events.NewRecorder(ctx, client, "daemonset-controller"),
		Logger: log.With("controller", "daemonset")})
	sts := statefulset.New(statefulset.Config{Client: client, Informers: factory, Recorder: events.NewRecorder(ctx, client, "statefulset-controller"),
		Logger: log.With("controller", "statefulset")})
	jobs := job.New(job.Config{Client: client, Informers: factory, Recorder: events.NewRecorder(ctx, client, "job-controller"),
		Logger: log.With("controller", "job")})
	cron := cronjob.New(cronjob.Config{Client: client, Informers: factory, Recorder: events.NewRecorder(ctx, client, "cronjob-controller"),
		Logger: log.With("controller", "cronjob")})
	resourceMetrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	autoscaler := hpa.New(hpa.Config{Client: client, Informers: factory, Metrics: hpa.NewMetricsClient(resourceMetrics),
		Recorder: events.NewRecorder(ctx, client, "horizontal-pod-autoscaler"), SyncPeriod: hpaSyncPeriod, Logger: log.With("controller", "horizontalpodautoscaling")})
	if err := localpv.EnsureStorageClass(ctx, client); err != nil {
		return err
	}
	pv := localpv.New(localpv.Config{Client: client, Informers: factory, PVRoot: pvRoot, Logger: log.With("controller", "localpv"),
		Recorder: events.NewRecorder(ctx, client, "tranche.dev/local")})
	if !lbPool.Empty() {
		go servicelb.New(servicelb.Config{Client: client, Informers: factory, Pool: lbPool,
			Recorder: events.NewRecorder(ctx, client, "service-lb-controller"), Logger: log.With("controller", "servicelb")}).Run(ctx)
	}
	aggregation := clusterroleaggregation.New(clusterroleaggregation.Config{Client: client, Informers: factory, Logger: log.With("controller", "clusterrole-aggregation")})
	factory.Start(ctx.Done())
	go aggregation.Run(ctx, 5)
	go pv.Run(ctx)
	go rs.Run(ctx, 4)
	go rcm.Run(ctx, 2)
	go pgc.Run(ctx)
	go deploy.Run(ctx, 4)
	go ds.Run(ctx, 2)
	go sts.Run(ctx, 2)
	go jobs.Run(ctx, 2)
	go cron.Run(ctx, 1)
	go autoscaler.Run(ctx, 5)
	go sched.Run(ctx)
	go ipam.Run(ctx)
	go lifecycle.Run(ctx)
	go sa.Run(ctx)
	go rootCA.Run(ctx)
	go ns.Run(ctx, 2)
	go collector.Run(ctx, 2)
	go slices.Run(ctx, 4)
	go eps.Run(ctx, 2)
	go mirror.Run(ctx, 2)
	return nil
}
