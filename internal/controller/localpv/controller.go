// Package localpv provisions and binds PersistentVolumes for claims of the
// StorageClass "local" (provisioner tranche.dev/local), the cluster's
// default class. A volume is a directory PVRoot/pvc-<claim uid>, so its
// data outlives pods and cluster restarts; with reclaim policy Delete it is
// removed with its claim, with Retain the PV is only marked Released.
//
// It plays the parts of Kubernetes' PersistentVolume controller for these
// claims (binding, release) and of a dynamic provisioner (creation). Class
// "local" binds Immediately and has no node affinity: every node of a
// local cluster shares the host's file system.
package localpv

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Work queue keys are a kind prefix and the object's cache key.
const (
	claimKeyPrefix  = "claim:"
	volumeKeyPrefix = "volume:"
)

// EnsureStorageClass creates the StorageClass "local" (provisioner
// tranche.dev/local, reclaim policy Delete, binding mode Immediate),
// annotated as the default class, unless a class of that name exists; an
// existing one is left as the administrator made it.
func EnsureStorageClass(ctx context.Context, client kubernetes.Interface) error {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: ClassName, Annotations: map[string]string{annDefaultClass: "true"}},
		Provisioner:       Provisioner,
		ReclaimPolicy:     ptr.To(v1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	_, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating storageclass %s: %w", ClassName, err)
	}
	return nil
}

// Config is what New needs.
type Config struct {
	// Client writes PVs, claims and their status.
	Client kubernetes.Interface
	// Informers provides PersistentVolumeClaims, PersistentVolumes and
	// StorageClasses; New must be called before the caller starts it.
	Informers informers.SharedInformerFactory
	// PVRoot is the directory holding one directory per volume.
	PVRoot string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Recorder receives ProvisioningSucceeded, ProvisioningFailed and
	// ClaimLost events on claims; nil drops them.
	Recorder record.EventRecorder
}

// Controller provisions, binds and reclaims local volumes. Create it with
// New and start it with Run.
type Controller struct {
	client   kubernetes.Interface
	pvRoot   string
	log      *slog.Logger
	recorder record.EventRecorder

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
}

// New wires the controller to the factory's informers.
func New(cfg Config) *Controller {
	pvcInf := cfg.Informers.Core().V1().PersistentVolumeClaims()
	pvInf := cfg.Informers.Core().V1().PersistentVolumes()
	scInf := cfg.Informers.Storage().V1().StorageClasses()
	c := &Controller{
		client: cfg.Client, pvRoot: cfg.PVRoot, log: cfg.Logger, recorder: cfg.Recorder,
		claims: pvcInf.Lister(), volumes: pvInf.Lister(), classes: scInf.Lister(),
		synced: []cache.InformerSynced{pvcInf.Informer().HasSynced, pvInf.Informer().HasSynced, scInf.Informer().HasSynced},
		queue:  worker.NewQueue("localpv", nil),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	_, _ = pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueClaim,
		UpdateFunc: func(_, obj interface{}) { c.enqueueClaim(obj) },
		DeleteFunc: c.enqueueClaim,
	})
	_, _ = pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueVolume,
		UpdateFunc: func(_, obj interface{}) { c.enqueueVolume(obj) },
		DeleteFunc: c.enqueueVolume,
	})
	// A new or changed class (a default appearing) may concern any claim.
	_, _ = scInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { c.enqueueAllClaims() },
		UpdateFunc: func(_, _ interface{}) { c.enqueueAllClaims() },
	})
	return c
}

// enqueueClaim queues a claim, and on deletion its volume.
func (c *Controller) enqueueClaim(obj interface{}) {
	claim := tombstone.As[*v1.PersistentVolumeClaim](obj)
	if claim == nil {
		return
	}
	c.queue.Add(claimKeyPrefix + claim.Namespace + "/" + claim.Name)
	c.queue.Add(volumeKeyPrefix + pvName(claim))
}

// enqueueVolume queues a volume and the claim it names.
func (c *Controller) enqueueVolume(obj interface{}) {
	pv := tombstone.As[*v1.PersistentVolume](obj)
	if pv == nil {
		return
	}
	c.queue.Add(volumeKeyPrefix + pv.Name)
	if ref := pv.Spec.ClaimRef; ref != nil {
		c.queue.Add(claimKeyPrefix + ref.Namespace + "/" + ref.Name)
	}
}

// enqueueAllClaims queues every claim in the cache.
func (c *Controller) enqueueAllClaims() {
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return
	}
	for _, claim := range claims {
		c.queue.Add(claimKeyPrefix + claim.Namespace + "/" + claim.Name)
	}
}

// Run processes claims and volumes until ctx ends; it returns once the
// sync under way returned.
func (c *Controller) Run(ctx context.Context) {
	worker.Loop{Kind: "local volume", Queue: c.queue, Synced: c.synced, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Logger: c.log}.Run(ctx, 1)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// sync dispatches a queue key.
func (c *Controller) sync(ctx context.Context, key string) error {
	if name, ok := strings.CutPrefix(key, volumeKeyPrefix); ok {
		return c.syncVolume(ctx, name)
	}
	ns, name, _ := strings.Cut(strings.TrimPrefix(key, claimKeyPrefix), "/")
	return c.syncClaim(ctx, ns, name)
}

// syncClaim provisions and binds one claim.
func (c *Controller) syncClaim(ctx context.Context, ns, name string) error {
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pv, err := c.volumes.Get(pvName(claim))
	if apierrors.IsNotFound(err) {
		pv, err = nil, nil
	}
	if err != nil {
		return err
	}
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return err
	}
	return c.applyClaim(ctx, claim, planClaim(claim, pv, classes, c.pvRoot))
}

// applyClaim carries out a claim plan in order: class, directory and PV,
// PV status, claim, claim status. A failure stops it; the retry plans
// again from what is then stored.
func (c *Controller) applyClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, plan claimPlan) error {
	id := claim.Namespace + "/" + claim.Name
	if plan.SetClass != "" {
		// The resourceVersion makes the patch fail if the claim changed
		// since it was seen with a nil class.
		patch, err := json.Marshal(map[string]interface{}{
			"metadata": map[string]string{"resourceVersion": claim.ResourceVersion},
			"spec":     map[string]string{"storageClassName": plan.SetClass},
		})
		if err != nil {
			return err
		}
		if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("setting default storage class of persistentvolumeclaim %s: %w", id, err)
		}
		c.log.Info("assigned default storage class", "claim", id, "class", plan.SetClass)
		return nil
	}
	if plan.Event != nil && plan.Event.Type == v1.EventTypeWarning && plan.CreatePV == nil {
		c.recorder.Event(claim, plan.Event.Type, plan.Event.Reason, plan.Event.Message)
	}
	pv := plan.CreatePV
	if pv != nil {
		if err := os.MkdirAll(pv.Spec.HostPath.Path, 0o777); err != nil {
			return fmt.Errorf("creating directory of persistentvolume %s for %s: %w", pv.Name, id, err)
		}
		// Pods of any user may write their volume; MkdirAll's mode is
		// filtered by the umask.
		if err := os.Chmod(pv.Spec.HostPath.Path, 0o777); err != nil {
			return fmt.Errorf("setting mode of directory of persistentvolume %s: %w", pv.Name, err)
		}
		created, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating persistentvolume %s for %s: %w", pv.Name, id, err)
		}
		pv = created
		c.log.Info("provisioned volume", "claim", id, "volume", pv.Name, "path", pv.Spec.HostPath.Path)
		c.recorder.Event(claim, plan.Event.Type, plan.Event.Reason, plan.Event.Message)
	}
	if plan.BindPV {
		if pv == nil {
			cached, err := c.volumes.Get(pvName(claim))
			if err != nil {
				return err
			}
			pv = cached
		}
		pv = pv.DeepCopy()
		pv.Status.Phase = v1.VolumeBound
		pv.Status.Message = ""
		if _, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("marking persistentvolume %s Bound: %w", pv.Name, err)
		}
	}
	current := claim
	if plan.Claim != nil {
		updated, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, plan.Claim, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("binding persistentvolumeclaim %s: %w", id, err)
		}
		current = updated
	}
	if plan.ClaimStatus != nil {
		next := current.DeepCopy()
		next.Status = *plan.ClaimStatus
		if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating status of persistentvolumeclaim %s: %w", id, err)
		}
		if plan.ClaimStatus.Phase == v1.ClaimBound && claim.Status.Phase != v1.ClaimBound {
			c.log.Info("bound claim", "claim", id, "volume", next.Spec.VolumeName)
		}
	}
	return nil
}

// syncVolume releases or deletes a volume whose claim is gone. The cache
// may lag, so a claim it misses is confirmed with the API first.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || pv.Annotations[annProvisionedBy] != Provisioner {
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if planVolume(pv, claim) == volumeKeep {
		return nil
	}
	claim, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		claim, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("reading persistentvolumeclaim %s/%s of persistentvolume %s: %w", ref.Namespace, ref.Name, name, err)
	}
	switch planVolume(pv, claim) {
	case volumeDelete:
		return c.deleteVolume(ctx, pv)
	case volumeRelease:
		next := pv.DeepCopy()
		next.Status.Phase = v1.VolumeReleased
		if _, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("marking persistentvolume %s Released: %w", name, err)
		}
		c.log.Info("released volume; its data is retained", "volume", name)
	}
	return nil
}

// deleteVolume removes a volume's directory, then the PV. A directory
// outside PVRoot is not ours to remove, so such a PV is only deleted.
func (c *Controller) deleteVolume(ctx context.Context, pv *v1.PersistentVolume) error {
	if dir, ok := ownedDir(pv, c.pvRoot); ok {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing directory of persistentvolume %s: %w", pv.Name, err)
		}
	} else {
		c.log.Warn("persistentvolume directory is outside the volume root; leaving it", "volume", pv.Name)
	}
	err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting persistentvolume %s: %w", pv.Name, err)
	}
	c.log.Info("deleted volume with its claim", "volume", pv.Name)
	return nil
}
