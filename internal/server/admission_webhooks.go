package server

import (
	"context"
	"fmt"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/tranche/tranche/internal/admission"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
)

// newWebhooks returns the admission step of webhooks and ValidatingAdmissionPolicies,
// called after the built-in mutating and validating steps as kube-apiserver orders its
// plugins; it admits everything until started with the loopback client.
func newWebhooks(cfg Config) *admission.Webhooks {
	return &admission.Webhooks{User: requestUserInfo, ClusterDial: cfg.ClusterDial}
}

// startWebhooks starts w with the loopback client: informers, a dynamic client and a
// discovery-backed REST mapper for policies' params, and the server's authorizer.
func startWebhooks(ctx context.Context, w *admission.Webhooks, loop *rest.Config, client kubernetes.Interface, sec *security) error {
	dyn, err := dynamic.NewForConfig(loop)
	if err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	return w.Start(ctx, admission.Clients{Kube: client, Dynamic: dyn, RESTMapper: mapper, Authorizer: upstreamAuthorizer{sec.authorizer}})
}

// requestUserInfo is the authenticated requester of ctx's request, for AdmissionReview's
// userInfo.
func requestUserInfo(ctx context.Context) user.Info {
	u := userFrom(ctx)
	if u == nil {
		return nil
	}
	return &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

// upstreamAuthorizer asks the server's authorizer the questions of k8s.io/apiserver's
// admission plugins (a policy's authorizer checks).
type upstreamAuthorizer struct{ a authz.Authorizer }

func (u upstreamAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	var who *authn.User
	if info := a.GetUser(); info != nil {
		who = &authn.User{Name: info.GetName(), UID: info.GetUID(), Groups: info.GetGroups(), Extra: info.GetExtra()}
	}
	d, reason, err := u.a.Authorize(ctx, authz.Attributes{User: who, Verb: a.GetVerb(), Namespace: a.GetNamespace(),
		APIGroup: a.GetAPIGroup(), APIVersion: a.GetAPIVersion(), Resource: a.GetResource(), Subresource: a.GetSubresource(),
		Name: a.GetName(), Path: a.GetPath(), ResourceRequest: a.IsResourceRequest()})
	switch d {
	case authz.Allow:
		return authorizer.DecisionAllow, reason, err
	case authz.Deny:
		return authorizer.DecisionDeny, reason, err
	}
	return authorizer.DecisionNoOpinion, reason, err
}
