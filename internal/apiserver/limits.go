package apiserver

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The cost bounds kube-apiserver puts on a request (k8s.io/apiserver's
// endpoints/handlers and server/filters), with its defaults.
const (
	// maxJSONPatchOperations bounds the operations of one JSON patch.
	maxJSONPatchOperations = 10000
	// jsonPatchMaxCopyBytes bounds the bytes the copy operations of one JSON patch
	// may add (kube-apiserver's JSONPatchMaxCopyBytes, 3 MiB): without it, a
	// kilobyte of self-doubling copies builds gigabytes.
	jsonPatchMaxCopyBytes = 3 << 20
	// DefaultMaxRequestsInFlight and DefaultMaxMutatingRequestsInFlight are
	// kube-apiserver's defaults of --max-requests-inflight and
	// --max-mutating-requests-inflight.
	DefaultMaxRequestsInFlight         = 400
	DefaultMaxMutatingRequestsInFlight = 200
)

func init() {
	// json-patch reads its copy bound from a package variable; kube-apiserver sets it
	// the same way when it builds its server. No other code in the binary applies
	// JSON patches with a different bound in mind.
	if atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit) == 0 {
		atomic.StoreInt64(&jsonpatch.AccumulatedCopySizeLimit, jsonPatchMaxCopyBytes)
	}
}

// decodeJSONPatch decodes a JSON patch and refuses one of more than
// maxJSONPatchOperations operations, as kube-apiserver does (413).
func decodeJSONPatch(patch []byte) (jsonpatch.Patch, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	if len(p) > maxJSONPatchOperations {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(p)))
	}
	return p, nil
}

// checkPatchedSize refuses a patch whose result is larger than a request body may be:
// an object that could not have been sent whole cannot be made by patching either.
func checkPatchedSize(patched []byte) error {
	if len(patched) > maxBodyBytes {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"the patched object is %d bytes, larger than the limit of %d bytes", len(patched), maxBodyBytes))
	}
	return nil
}

// Upstream's long-running requests (kube-apiserver's BasicLongRunningRequestCheck):
// they hold a connection open for as long as the client wants, so they are not
// counted against the in-flight limits; the streaming subresources are also the
// CONNECT verb of the request metrics (instrument.go).
var (
	longRunningVerbs        = map[string]bool{"watch": true, "proxy": true}
	longRunningSubresources = map[string]bool{"attach": true, "exec": true, "proxy": true, "log": true, "portforward": true}
	readOnlyVerbs           = map[string]bool{"get": true, "list": true, "watch": true}
)

// inFlight bounds the requests served at once, read-only and mutating apart, as
// kube-apiserver's max-in-flight filter does; a request over the bound is refused
// with 429 and Retry-After: 1 rather than queued.
type inFlight struct {
	readOnly, mutating chan struct{} // nil: no limit
	// exempt requests are served even over the bound (system:masters).
	exempt func(*http.Request) bool
	gauge  *prometheus.GaugeVec // nil: no metrics
}

// newInFlight makes the limiter; 0 for a limit means none. reg may be nil.
func newInFlight(readOnly, mutating int, exempt func(*http.Request) bool, reg prometheus.Registerer) (*inFlight, error) {
	if readOnly < 0 || mutating < 0 {
		return nil, fmt.Errorf("apiserver: in-flight limits can not be negative (read-only %d, mutating %d)", readOnly, mutating)
	}
	l := &inFlight{exempt: exempt}
	if readOnly > 0 {
		l.readOnly = make(chan struct{}, readOnly)
	}
	if mutating > 0 {
		l.mutating = make(chan struct{}, mutating)
	}
	if reg != nil {
		l.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "Number of requests currently being served per request kind (readOnly, mutating), long-running requests excepted.",
		}, []string{"request_kind"})
		if err := reg.Register(l.gauge); err != nil {
			return nil, fmt.Errorf("apiserver: registering apiserver_current_inflight_requests: %w", err)
		}
		l.gauge.WithLabelValues("readOnly").Set(0)
		l.gauge.WithLabelValues("mutating").Set(0)
	}
	return l, nil
}

// start admits a request and returns the function to call when it is done; when the
// request's kind is at its limit it answers 429 itself and returns false.
func (l *inFlight) start(w http.ResponseWriter, r *http.Request, req Request) (done func(), ok bool) {
	if longRunningVerbs[req.Verb] || (req.IsResourceRequest && longRunningSubresources[req.Subresource]) {
		return func() {}, true
	}
	kind, c := "mutating", l.mutating
	if readOnlyVerbs[req.Verb] {
		kind, c = "readOnly", l.readOnly
	}
	if c == nil {
		return func() {}, true
	}
	select {
	case c <- struct{}{}:
	default:
		if l.exempt != nil && l.exempt(r) {
			return func() {}, true
		}
		writeError(w, nil, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1))
		return nil, false
	}
	l.record(kind, c)
	return func() {
		<-c
		l.record(kind, c)
	}, true
}

func (l *inFlight) record(kind string, c chan struct{}) {
	if l.gauge != nil {
		l.gauge.WithLabelValues(kind).Set(float64(len(c)))
	}
}
