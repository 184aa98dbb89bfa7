package volumes

import (
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Token refresh, as kubelet's token manager does it: a token is renewed
// once 80% of its lifetime has passed, and at the latest a day after it
// was issued, so that a long-lived token still rotates.
const (
	refreshAfterPercent = 80
	maxTokenAge         = 24 * time.Hour
	// defaultTokenSeconds is the API server's default for a projection
	// that names no expirationSeconds.
	defaultTokenSeconds int64 = 3600
)

// tokenKey identifies one cached token: the pod it is bound to and what
// was asked for.
type tokenKey struct {
	pod            types.UID
	serviceAccount string
	audience       string
	seconds        int64
}

// needsRefresh reports whether tr must be replaced at now. kubelet also
// subtracts up to ten seconds of random jitter to spread renewals; tranche
// renews exactly at the mark so that the timing is predictable.
func needsRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	if tr == nil || tr.Spec.ExpirationSeconds == nil {
		return true
	}
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-ttl)
	if now.After(issued.Add(maxTokenAge)) {
		return true
	}
	return !now.Before(issued.Add(ttl * refreshAfterPercent / 100))
}
