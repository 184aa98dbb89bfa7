package flowcontrol

import (
	"context"
	"fmt"
	"log/slog"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
)

// Config is what New needs.
type Config struct {
	Client kubernetes.Interface
	// Informers provides FlowSchemas and PriorityLevelConfigurations; the caller starts
	// it after New.
	Informers informers.SharedInformerFactory
	Clock     clock.WithTicker
	Logger    *slog.Logger
}

// Controller writes every FlowSchema's Dangling condition.
type Controller struct {
	client  kubernetes.Interface
	schemas flowcontrollisters.FlowSchemaLister
	levels  flowcontrollisters.PriorityLevelConfigurationLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	clock   clock.WithTicker
	log     *slog.Logger
}

// New wires the controller to the factory's informers; it panics without Client or
// Informers, a wiring mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("flowcontrol.New: Client and Informers are required")
	}
	log, clk, _ := worker.Defaults(cfg.Logger, cfg.Clock, nil)
	fsInf := cfg.Informers.Flowcontrol().V1().FlowSchemas()
	plInf := cfg.Informers.Flowcontrol().V1().PriorityLevelConfigurations()
	c := &Controller{client: cfg.Client, schemas: fsInf.Lister(), levels: plInf.Lister(),
		synced: []cache.InformerSynced{fsInf.Informer().HasSynced, plInf.Informer().HasSynced},
		queue:  worker.NewQueue("flowschema_dangling", clk), clock: clk, log: log}
	worker.Watch(fsInf.Informer(), func(obj any) { worker.Enqueue(c.queue, obj) })
	// A level appearing or going changes the schemas that name it.
	worker.Watch(plInf.Informer(), func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		schemas, _ := c.schemas.List(labels.Everything())
		for _, fs := range schemas {
			if fs.Spec.PriorityLevelConfiguration.Name == key {
				c.queue.Add(fs.Name)
			}
		}
	})
	return c
}

// Run syncs FlowSchemas with the given number of workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "FlowSchema", Queue: c.queue, Synced: c.synced, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Expected: apierrors.IsConflict, Logger: c.log}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) sync(ctx context.Context, name string) error {
	fs, err := c.schemas.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pl := fs.Spec.PriorityLevelConfiguration.Name
	_, err = c.levels.Get(pl)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	want := DanglingCondition(pl, err != nil)
	for _, cur := range fs.Status.Conditions {
		if cur.Type == want.Type && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
			return nil
		}
	}
	out := fs.DeepCopy()
	want.LastTransitionTime = metav1.NewTime(c.clock.Now())
	replaced := false
	for i, cur := range out.Status.Conditions {
		if cur.Type == want.Type {
			if cur.Status == want.Status {
				want.LastTransitionTime = cur.LastTransitionTime
			}
			out.Status.Conditions[i], replaced = want, true
		}
	}
	if !replaced {
		out.Status.Conditions = append(out.Status.Conditions, want)
	}
	_, err = c.client.FlowcontrolV1().FlowSchemas().UpdateStatus(ctx, out, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// DanglingCondition is the Dangling condition of a FlowSchema naming level pl, True
// when pl does not exist, worded as kube-apiserver words it.
func DanglingCondition(pl string, dangling bool) flowcontrolv1.FlowSchemaCondition {
	if dangling {
		return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue, Reason: "NotFound",
			Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", pl)}
	}
	return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse, Reason: "Found",
		Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", pl)}
}
