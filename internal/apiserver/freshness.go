package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// freshnessTimeout is how long a read at a resourceVersion the server has not
	// reached yet waits for it, as kube-apiserver's watch cache does (blockTimeout).
	freshnessTimeout = 3 * time.Second
	// freshnessPoll is how often the wait reads the store's revision.
	freshnessPoll = 20 * time.Millisecond
	// tooLargeRetrySeconds is the Retry-After of the answer when it has not.
	tooLargeRetrySeconds = 1
)

// waitForRevision returns once the store has reached revision rv. A client names a
// revision it has seen (from another API server, or a guess); if the store does not
// reach it within freshnessTimeout the read fails as kube-apiserver's does: 504 Timeout
// "Too large resource version" with a ResourceVersionTooLarge cause and Retry-After.
func (s *Server) waitForRevision(ctx context.Context, rv int64) error {
	deadline := time.Now().Add(freshnessTimeout)
	for {
		cur, err := s.cfg.Storage.Revision(ctx)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if cur >= rv {
			return nil
		}
		if !time.Now().Before(deadline) {
			return tooLargeResourceVersion(rv, cur)
		}
		select {
		case <-ctx.Done():
			return apierrors.NewTimeoutError(fmt.Sprintf("waiting for resource version %d", rv), tooLargeRetrySeconds)
		case <-time.After(freshnessPoll):
		}
	}
}

// tooLargeResourceVersion is the error kube-apiserver's storage gives for a minimum
// resourceVersion above the current one (storage.NewTooLargeResourceVersionError).
func tooLargeResourceVersion(rv, cur int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), tooLargeRetrySeconds)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// waitForRequestedRevision waits for the resourceVersion a get or list names, if any: "" and
// "0" (any state) need no wait; one that does not parse is left to the read to refuse.
func (s *Server) waitForRequestedRevision(ctx context.Context, rv string) error {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 0 {
		return nil
	}
	return s.waitForRevision(ctx, n)
}
