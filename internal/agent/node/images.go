package node

import (
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/imagestore"
)

// Kubelet's limits for status.images: nodeStatusMaxImages (default 50) images, largest
// first, and at most 5 names each (MaxNamesPerImageInNodeStatus).
const (
	MaxImagesInNodeStatus        = 50
	MaxNamesPerImageInNodeStatus = 5
)

// ImageLister lists the node's images for status.images.
type ImageLister func() ([]v1.ContainerImage, error)

// StoreImages lists the images of the host's store as status.images (see ContainerImages).
func StoreImages(store *imagestore.Store) ImageLister {
	return func() ([]v1.ContainerImage, error) {
		images, err := store.List()
		if err != nil {
			return nil, err
		}
		return ContainerImages(images), nil
	}
}

// ContainerImages is status.images as kubelet reports it: the largest images first, at most
// MaxImagesInNodeStatus of them, each with its repository digests ("repo@sha256:...") and
// then its tags ("repo:tag"), at most MaxNamesPerImageInNodeStatus names, and its size.
func ContainerImages(stored []imagestore.Image) []v1.ContainerImage {
	sorted := slices.Clone(stored)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Size != sorted[j].Size {
			return sorted[i].Size > sorted[j].Size
		}
		return sorted[i].Digest < sorted[j].Digest
	})
	if len(sorted) > MaxImagesInNodeStatus {
		sorted = sorted[:MaxImagesInNodeStatus]
	}
	out := []v1.ContainerImage{}
	for _, img := range sorted {
		// The catalog's bookkeeping names would only crowd the five an image may show.
		digests, tags := images.UserNames(img)
		names := append(digests, tags...)
		if len(names) > MaxNamesPerImageInNodeStatus {
			names = names[:MaxNamesPerImageInNodeStatus]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: img.Size})
	}
	return out
}

// SetImages makes the agent report the node's images in status.images from list; set it
// before Run.
func (a *Agent) SetImages(list ImageLister) { a.images = list }

// currentImages lists the images to report; ok is false when there is no lister or it
// failed (the status then keeps what it had).
func (a *Agent) currentImages() ([]v1.ContainerImage, bool) {
	if a.images == nil {
		return nil, false
	}
	images, err := a.images()
	if err != nil {
		a.log.Warn("listing the node's images for its status", "node", a.cfg.Name, "err", err)
		return nil, false
	}
	return images, true
}

// imagesChanged reports whether the node's images differ from the last reported ones, which
// makes the agent report its status at the next lease renewal rather than within a minute.
func (a *Agent) imagesChanged() bool {
	images, ok := a.currentImages()
	return ok && !apiequality.Semantic.DeepEqual(images, a.reportedImages)
}

// withImages sets status.images of next to the node's current images.
func (a *Agent) withImages(next *v1.Node) {
	if images, ok := a.currentImages(); ok {
		next.Status.Images = images
		a.reportedImages = images
	}
}
