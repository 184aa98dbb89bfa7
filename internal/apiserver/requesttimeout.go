package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/storage"
)

// DefaultRequestTimeout is kube-apiserver's --request-timeout default.
const DefaultRequestTimeout = time.Minute

// invalidTimeout is kube-apiserver's message for a timeout query parameter that is
// not a duration.
const invalidTimeout = "invalid timeout specified in the request URL"

// requestDeadline bounds a request that is not long-running as kube-apiserver's
// request-deadline filter does: by the server's request timeout, or by the shorter
// duration the client names in ?timeout= (kubectl --request-timeout); 0 or a longer one
// means the server's. A server without a request timeout leaves r as it is, as it does
// long-running requests (watches, streams, proxies).
func (s *Server) requestDeadline(r *http.Request, req Request) (*http.Request, context.CancelFunc, error) {
	limit := s.cfg.RequestTimeout
	if limit <= 0 || longRunningVerbs[req.Verb] || (req.IsResourceRequest && longRunningSubresources[req.Subresource]) {
		return r, func() {}, nil
	}
	timeout := limit
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return r, nil, apierrors.NewBadRequest(fmt.Sprintf("%s - %s", invalidTimeout, err))
		}
		if d > 0 && d < limit {
			timeout = d
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	return r.WithContext(ctx), cancel, nil
}

// timedOut is the answer to a request whose deadline passed while it was served, as
// kube-apiserver's REST handlers give it: 504 Timeout "request did not complete within
// requested timeout - context deadline exceeded". It returns err unchanged when the
// request's own deadline has not passed.
func timedOut(ctx context.Context, err error) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within requested timeout - %s", ctx.Err()), 0)
}

// storeFailure is the Status of a failure of the store itself (storage.UnavailableError),
// as kube-apiserver answers an etcd error that is not an API status: 500 with the store's
// own message ("etcdserver: request timed out") and no reason, which kubectl prints as
// "Error from server: etcdserver: request timed out". ok is false for other errors.
func storeFailure(err error) (st *apierrors.StatusError, ok bool) {
	var ue *storage.UnavailableError
	if !errors.As(err, &ue) {
		return nil, false
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: ue.Err.Error(),
	}}, true
}

// anyStateRead marks the context of a read whose resourceVersion is "0" ("any state,
// the newest preferred"): kube-apiserver answers those from its watch cache without
// reaching etcd, and tranche from the state of the etcd member its client reaches,
// without a round of consensus, so they still answer while etcd has no quorum.
func anyStateRead(ctx context.Context, rv string) context.Context {
	if rv != "0" {
		return ctx
	}
	return storage.WithStaleReads(ctx)
}
