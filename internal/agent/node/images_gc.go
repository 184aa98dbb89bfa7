package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/imagestore"
)

// ImageGCPeriod is how often kubelet's image garbage collection runs.
const ImageGCPeriod = 5 * time.Minute

// Reasons of kubelet's image garbage collection events on the Node.
const (
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonImageGCFailed       = "ImageGCFailed"
	ReasonInvalidDiskCapacity = "InvalidDiskCapacity"
)

// ImageGC configures the agent's image garbage collection.
type ImageGC struct {
	// Node is the node's name, which the events are about.
	Node  string
	Store *imagestore.Store
	// Policy are the thresholds; a HighThresholdPercent of 100 turns collection off, as
	// with kubelet.
	Policy imagestore.GCPolicy
	// Usage measures the store's file system (imagestore.FSUsage when nil).
	Usage    imagestore.UsageFunc
	Recorder record.EventRecorder
	// Period between runs (ImageGCPeriod when 0).
	Period time.Duration
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// RunImageGC runs image garbage collection at once and then every period until ctx ends,
// as kubelet's image manager does: past the high threshold it removes unused images, least
// recently used first, down to the low threshold. When that is not enough it records a
// FreeDiskSpaceFailed warning on the Node, and a failure repeated on the next run an
// ImageGCFailed warning.
func RunImageGC(ctx context.Context, g ImageGC) {
	if g.Policy.HighThresholdPercent >= 100 {
		g.logger().Info("image garbage collection is off (--image-gc-high-threshold 100)")
		return
	}
	if g.Clock == nil {
		g.Clock = clock.RealClock{}
	}
	period := g.Period
	if period <= 0 {
		period = ImageGCPeriod
	}
	t := g.Clock.NewTicker(period)
	defer t.Stop()
	failedBefore := false
	for {
		err := g.collect(ctx)
		switch {
		case err != nil && ctx.Err() == nil && failedBefore:
			g.logger().Error("image garbage collection failed multiple times in a row", "err", err)
			g.Recorder.Event(g.nodeRef(), v1.EventTypeWarning, ReasonImageGCFailed, err.Error())
		case err != nil && ctx.Err() == nil:
			g.logger().Warn("image garbage collection failed", "err", err)
		}
		failedBefore = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// collect runs one garbage collection, recording FreeDiskSpaceFailed or InvalidDiskCapacity
// when it has to.
func (g ImageGC) collect(ctx context.Context) error {
	usage := g.Usage
	if usage == nil {
		usage = imagestore.FSUsage(g.Store.Dir())
	}
	res, err := g.Store.GarbageCollect(ctx, g.Policy, usage)
	for _, img := range res.Removed {
		g.logger().Info("removed an unused image to free disk space", "image", img.Digest, "names", img.Names, "size", img.Size)
	}
	var fe *imagestore.FreeSpaceError
	switch {
	case errors.As(err, &fe):
		g.Recorder.Event(g.nodeRef(), v1.EventTypeWarning, ReasonFreeDiskSpaceFailed, fe.Error())
	case errors.Is(err, imagestore.ErrInvalidCapacity):
		g.Recorder.Event(g.nodeRef(), v1.EventTypeWarning, ReasonInvalidDiskCapacity, err.Error())
	}
	if err == nil && res.ToFree > 0 {
		g.logger().Info("disk usage on the image file system was over the high threshold", "usage", res.UsagePercent,
			"highThreshold", g.Policy.HighThresholdPercent, "lowThreshold", g.Policy.LowThresholdPercent, "freed", res.Freed)
	}
	return err
}

// nodeRef is the Node as kubelet refers to it in its events (its UID is its name).
func (g ImageGC) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: g.Node, UID: types.UID(g.Node)}
}

func (g ImageGC) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Logger
}
