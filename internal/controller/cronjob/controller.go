// Package cronjob starts a Job for each start time of a CronJob's schedule
// (in its timeZone), named <cronjob>-<minutes since the epoch>, under its
// concurrencyPolicy, startingDeadlineSeconds and suspend; it keeps the
// active list, lastScheduleTime and lastSuccessfulTime and the history
// limits, and requeues itself for the next start time on the injected
// clock, as upstream's CronJob controller does.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/registry/batch"
	"github.com/tranche/tranche/internal/tombstone"
)

// maxRetries bounds the retries of a failing CronJob before it waits for
// its next event or start time.
const maxRetries = 15

// Config is what New needs.
type Config struct {
	// Client writes Jobs, CronJob status and events.
	Client kubernetes.Interface
	// Informers provides CronJobs and Jobs; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder receives the controller's events; nil drops them.
	Recorder record.EventRecorder
	// Clock decides when start times are due and times the requeues; nil
	// means the real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Controller reconciles CronJobs.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	logger   *slog.Logger

	cronJobs batchlisters.CronJobLister
	jobs     batchlisters.JobLister
	synced   []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller and registers its event handlers. It panics
// when Client or Informers is missing (a wiring mistake).
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("cronjob.New: Client and Informers are required")
	}
	cfg.Logger, cfg.Clock, cfg.Recorder = worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	cjInf := cfg.Informers.Batch().V1().CronJobs()
	jobInf := cfg.Informers.Batch().V1().Jobs()
	c := &Controller{
		client:   cfg.Client,
		recorder: cfg.Recorder,
		clock:    cfg.Clock,
		logger:   cfg.Logger,
		cronJobs: cjInf.Lister(),
		jobs:     jobInf.Lister(),
		synced:   []cache.InformerSynced{cjInf.Informer().HasSynced, jobInf.Informer().HasSynced},
		queue:    worker.NewQueue("cronjob", cfg.Clock),
	}
	worker.Watch(cjInf.Informer(), c.enqueue)
	worker.Watch(jobInf.Informer(), c.onJob)
	return c
}

// Run waits for the caches and syncs with the given number of workers until
// ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "CronJob", Queue: c.queue, Synced: c.synced, Sync: c.syncAndRequeue, MaxRetries: maxRetries, Logger: c.logger}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// syncAndRequeue syncs key and wakes it again at its next start time, unless
// the sync failed and will be retried sooner: a CronJob past its retry
// budget still waits for its next start time.
func (c *Controller) syncAndRequeue(ctx context.Context, key string) error {
	requeue, err := c.sync(ctx, key)
	if requeue > 0 && (err == nil || c.queue.NumRequeues(key) >= maxRetries) {
		c.queue.AddAfter(key, requeue)
	}
	return err
}

func (c *Controller) enqueue(obj any) { worker.Enqueue(c.queue, obj) }

// onJob wakes the CronJob owning the Job.
func (c *Controller) onJob(obj any) {
	if j := tombstone.As[*batchv1.Job](obj); j != nil {
		if key, _ := worker.OwnerKey(j, controllerKind); key != "" {
			c.queue.Add(key)
		}
	}
}

// sync reconciles one CronJob (namespace/name) and returns when to look
// again: the next start time.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, fmt.Errorf("CronJob key %q: %w", key, err)
	}
	cached, err := c.cronJobs.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("getting CronJob %s: %w", key, err)
	}
	cj := cached.DeepCopy()
	all, err := c.jobs.Jobs(ns).List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("listing Jobs of CronJob %s: %w", key, err)
	}
	var jobs []*batchv1.Job
	known := map[types.UID]bool{}
	for _, j := range all {
		if ref := metav1.GetControllerOf(j); ref != nil && ref.UID == cj.UID {
			jobs = append(jobs, j)
			known[j.UID] = true
		}
	}
	gone, err := c.goneActive(ctx, cj, known)
	if err != nil {
		return 0, err
	}
	s := snapshot{cj: cj, jobs: jobs, gone: gone, loc: time.Local, now: c.clock.Now()}
	if tz := cj.Spec.TimeZone; tz != nil {
		if s.loc, err = time.LoadLocation(*tz); err != nil {
			c.recorder.Eventf(cj, v1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			s.loc = nil
		}
	}
	if s.loc != nil {
		if strings.Contains(cj.Spec.Schedule, "TZ") {
			c.recorder.Eventf(cj, v1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
		}
		if s.sched, err = batch.ParseSchedule(cj.Spec.Schedule); err != nil {
			c.recorder.Eventf(cj, v1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
			s.sched = nil
		}
	}
	if s.loc == nil {
		s.loc = time.UTC
	}
	p := compute(s)
	return p.requeue, c.apply(ctx, cj, p)
}

// goneActive returns the active references whose Job the cache lacks and
// the API confirms gone (or replaced by another of the same name).
func (c *Controller) goneActive(ctx context.Context, cj *batchv1.CronJob, known map[types.UID]bool) (map[types.UID]bool, error) {
	gone := map[types.UID]bool{}
	for _, ref := range cj.Status.Active {
		if known[ref.UID] {
			continue
		}
		j, err := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone[ref.UID] = true
		case err != nil:
			return nil, fmt.Errorf("getting active Job %s/%s of CronJob %s: %w", cj.Namespace, ref.Name, cj.Name, err)
		case j.UID != ref.UID:
			gone[ref.UID] = true
		}
	}
	return gone, nil
}

// apply deletes replaced and expired Jobs, creates the due one, and writes
// the status.
func (c *Controller) apply(ctx context.Context, cj *batchv1.CronJob, p plan) error {
	var errs []error
	api := c.client.BatchV1().Jobs(cj.Namespace)
	bg := metav1.DeletePropagationBackground
	for _, j := range append(append([]*batchv1.Job(nil), p.replaced...), p.expired...) {
		err := api.Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &j.UID}})
		switch {
		case err == nil:
			c.recorder.Eventf(cj, v1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
		case apierrors.IsNotFound(err):
		default:
			c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
			errs = append(errs, fmt.Errorf("deleting Job %s/%s of CronJob %s: %w", j.Namespace, j.Name, cj.Name, err))
		}
	}
	if p.create != nil {
		created, err := api.Create(ctx, p.create, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.recorder.Eventf(cj, v1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
			p.status.Active = append(p.status.Active, v1.ObjectReference{
				Kind: "Job", APIVersion: batchv1.SchemeGroupVersion.String(), Namespace: created.Namespace,
				Name: created.Name, UID: created.UID, ResourceVersion: created.ResourceVersion,
			})
		case apierrors.IsAlreadyExists(err):
			// An earlier sync created it; the next sync lists it.
		default:
			c.recorder.Eventf(cj, v1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
			return errors.Join(append(errs, fmt.Errorf("creating Job %s/%s: %w", cj.Namespace, p.create.Name, err))...)
		}
	}
	if !reflect.DeepEqual(cj.Status, p.status) {
		cj.Status = p.status
		if _, err := c.client.BatchV1().CronJobs(cj.Namespace).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating status of CronJob %s/%s: %w", cj.Namespace, cj.Name, err))
		}
	}
	for _, e := range p.events {
		c.recorder.Event(cj, e.eventType, e.reason, e.message)
	}
	return errors.Join(errs...)
}
