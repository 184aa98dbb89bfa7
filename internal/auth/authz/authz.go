// Package authz decides whether an authenticated user may do what a request asks:
// RBAC over Roles, ClusterRoles and their bindings (with Kubernetes' matching rules
// and ClusterRole aggregation), the system:masters group, and a Node authorizer for
// node agents. Authorizers read through small injected interfaces and do no other
// I/O, so they are tested without a server.
package authz

import (
	"context"
	"errors"
	"strings"

	"github.com/tranche/tranche/internal/auth/authn"
)

// Attributes describe a request to authorize; see authn.Attributes (the type lives
// there because impersonation needs it too).
type Attributes = authn.Attributes

// Decision is an authorizer's answer.
type Decision int

const (
	// NoOpinion leaves the decision to the next authorizer; when every authorizer has
	// no opinion the request is denied.
	NoOpinion Decision = iota
	// Allow permits the request; later authorizers are not asked.
	Allow
	// Deny forbids the request; later authorizers are not asked.
	Deny
)

// String returns the decision's name.
func (d Decision) String() string {
	switch d {
	case Allow:
		return "Allow"
	case Deny:
		return "Deny"
	default:
		return "NoOpinion"
	}
}

// Authorizer decides on one request. The reason explains the decision (it is shown
// after the forbidden message when not empty); an error means the decision could
// not be made completely and is never an Allow by itself.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// Union asks its authorizers in order. The first Allow or Deny is the answer;
// otherwise the result is NoOpinion with the non-empty reasons joined by newlines and
// every error met.
type Union []Authorizer

// Authorize implements Authorizer.
func (u Union) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var reasons []string
	var errs []error
	for _, z := range u {
		decision, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if decision == Allow || decision == Deny {
			return decision, reason, err
		}
	}
	return NoOpinion, strings.Join(reasons, "\n"), errors.Join(errs...)
}

// ForbiddenMessage returns the message of Kubernetes' 403 answer for a denied
// request, e.g. `pods is forbidden: User "system:serviceaccount:t1:robot" cannot list
// resource "pods" in API group "" in the namespace "t1"`, `pods "x" is forbidden: ...`
// for a named object, `... at the cluster scope` without a namespace and
// `forbidden: User "x" cannot get path "/metrics"` for non-resource URLs, followed by
// ": reason" when reason is not empty. a.ForbiddenError gives the whole status error.
func ForbiddenMessage(a Attributes, reason string) string {
	return a.ForbiddenError(reason).ErrStatus.Message
}
