package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
)

// reviews serves the create-only review resources and serviceaccounts/token; they
// are answered from the request, the authorizer and the caches, never stored.
type reviews struct {
	sec    *security
	client atomic.Pointer[kubernetes.Clientset]
}

func (rv *reviews) handlers() map[string]apiserver.SubresourceHandler {
	return map[string]apiserver.SubresourceHandler{
		"selfsubjectaccessreviews":  rv.selfSubjectAccessReview,
		"localsubjectaccessreviews": rv.subjectAccessReview,
		"subjectaccessreviews":      rv.subjectAccessReview,
		"selfsubjectrulesreviews":   rv.selfSubjectRulesReview,
		"tokenreviews":              rv.tokenReview,
		"selfsubjectreviews":        rv.selfSubjectReview,
		"serviceaccounts/token":     rv.tokenRequest,
	}
}

var (
	ssarGVK = authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview")
	sarGVK  = authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")
	lsarGVK = authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview")
	ssrrGVK = authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview")
	trGVK   = authenticationv1.SchemeGroupVersion.WithKind("TokenReview")
	ssrGVK  = authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview")
	treqGVK = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
)

// decide evaluates resource or non-resource attributes for user.
func (rv *reviews) decide(ctx context.Context, user *authn.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, gk schema.GroupKind) (authorizationv1.SubjectAccessReviewStatus, error) {
	if (ra == nil) == (nra == nil) {
		return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewInvalid(gk, "", field.ErrorList{
			field.Invalid(field.NewPath("spec", "resourceAttributes"), ra, "exactly one of nonResourceAttributes or resourceAttributes must be specified")})
	}
	a := authz.Attributes{User: user}
	if ra != nil {
		a.ResourceRequest = true
		a.Verb, a.Namespace, a.APIGroup, a.APIVersion = ra.Verb, ra.Namespace, ra.Group, ra.Version
		a.Resource, a.Subresource, a.Name = ra.Resource, ra.Subresource, ra.Name
	} else {
		a.Verb, a.Path = nra.Verb, nra.Path
	}
	d, reason, err := rv.sec.authorizer.Authorize(ctx, a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authz.Allow, Denied: d == authz.Deny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st, nil
}

func requester(ctx context.Context) (*authn.User, error) {
	u := userFrom(ctx)
	if u == nil {
		return nil, apierrors.NewUnauthorized("no user")
	}
	return u, nil
}

func (rv *reviews) selfSubjectAccessReview(ctx context.Context, w http.ResponseWriter, r *http.Request, _ apiserver.Request) error {
	var in authorizationv1.SelfSubjectAccessReview
	if _, err := apiserver.DecodeBody(r, &in, ssarGVK); err != nil {
		return err
	}
	user, err := requester(ctx)
	if err != nil {
		return err
	}
	st, err := rv.decide(ctx, user, in.Spec.ResourceAttributes, in.Spec.NonResourceAttributes, ssarGVK.GroupKind())
	if err != nil {
		return err
	}
	in.Status = st
	in.CreationTimestamp = metav1.Time{}
	apiserver.WriteObject(w, http.StatusCreated, &in)
	return nil
}

func (rv *reviews) subjectAccessReview(ctx context.Context, w http.ResponseWriter, r *http.Request, req apiserver.Request) error {
	var in authorizationv1.SubjectAccessReview
	gvk := sarGVK
	if req.Resource == "localsubjectaccessreviews" {
		gvk = lsarGVK
		var l authorizationv1.LocalSubjectAccessReview
		if _, err := apiserver.DecodeBody(r, &l, gvk); err != nil {
			return err
		}
		if ra := l.Spec.ResourceAttributes; ra != nil && ra.Namespace != req.Namespace {
			return apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %s", req.Namespace))
		}
		in.Spec = l.Spec
	} else if _, err := apiserver.DecodeBody(r, &in, gvk); err != nil {
		return err
	}
	if in.Spec.User == "" && len(in.Spec.Groups) == 0 {
		return apierrors.NewInvalid(gvk.GroupKind(), "", field.ErrorList{field.Invalid(field.NewPath("spec", "user"), in.Spec.User, "at least one of user or group must be specified")})
	}
	user := &authn.User{Name: in.Spec.User, UID: in.Spec.UID, Groups: in.Spec.Groups, Extra: map[string][]string{}}
	for k, v := range in.Spec.Extra {
		user.Extra[k] = v
	}
	st, err := rv.decide(ctx, user, in.Spec.ResourceAttributes, in.Spec.NonResourceAttributes, gvk.GroupKind())
	if err != nil {
		return err
	}
	in.Status = st
	in.TypeMeta = metav1.TypeMeta{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String()}
	apiserver.WriteObject(w, http.StatusCreated, &in)
	return nil
}

func (rv *reviews) selfSubjectRulesReview(ctx context.Context, w http.ResponseWriter, r *http.Request, _ apiserver.Request) error {
	var in authorizationv1.SelfSubjectRulesReview
	if _, err := apiserver.DecodeBody(r, &in, ssrrGVK); err != nil {
		return err
	}
	user, err := requester(ctx)
	if err != nil {
		return err
	}
	if in.Spec.Namespace == "" {
		return apierrors.NewInvalid(ssrrGVK.GroupKind(), "", field.ErrorList{field.Required(field.NewPath("spec", "namespace"), "")})
	}
	res, nonRes, err := rv.sec.rbac.RulesFor(user, in.Spec.Namespace)
	in.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: res, NonResourceRules: nonRes, Incomplete: err != nil}
	if err != nil {
		in.Status.EvaluationError = err.Error()
	}
	apiserver.WriteObject(w, http.StatusCreated, &in)
	return nil
}

func userInfo(u *authn.User) authenticationv1.UserInfo {
	out := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		out.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range u.Extra {
			out.Extra[k] = v
		}
	}
	return out
}

func (rv *reviews) tokenReview(ctx context.Context, w http.ResponseWriter, r *http.Request, _ apiserver.Request) error {
	var in authenticationv1.TokenReview
	if _, err := apiserver.DecodeBody(r, &in, trGVK); err != nil {
		return err
	}
	if in.Spec.Token == "" {
		return apierrors.NewInvalid(trGVK.GroupKind(), "", field.ErrorList{field.Required(field.NewPath("spec", "token"), "")})
	}
	probe, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	probe.Header.Set("Authorization", "Bearer "+in.Spec.Token)
	u, ok, err := rv.sec.authenticator.Authenticate(probe)
	switch {
	case err != nil:
		in.Status = authenticationv1.TokenReviewStatus{Error: err.Error()}
	case ok:
		in.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: userInfo(u), Audiences: in.Spec.Audiences}
	}
	apiserver.WriteObject(w, http.StatusCreated, &in)
	return nil
}

func (rv *reviews) selfSubjectReview(ctx context.Context, w http.ResponseWriter, r *http.Request, _ apiserver.Request) error {
	var in authenticationv1.SelfSubjectReview
	if _, err := apiserver.DecodeBody(r, &in, ssrGVK); err != nil {
		return err
	}
	user, err := requester(ctx)
	if err != nil {
		return err
	}
	in.Status.UserInfo = userInfo(user)
	apiserver.WriteObject(w, http.StatusCreated, &in)
	return nil
}

// tokenRequest serves serviceaccounts/NAME/token (kubectl create token).
func (rv *reviews) tokenRequest(ctx context.Context, w http.ResponseWriter, r *http.Request, req apiserver.Request) error {
	if req.Verb != "create" {
		return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "serviceaccounts/token"}, req.Verb)
	}
	var in authenticationv1.TokenRequest
	if _, err := apiserver.DecodeBody(r, &in, treqGVK); err != nil {
		return err
	}
	if err := rv.sec.nodeRestriction.AdmitTokenRequest(userFrom(ctx), req.Namespace, req.Name, &in); err != nil {
		return err
	}
	exp := int64(3600)
	if in.Spec.ExpirationSeconds != nil {
		exp = *in.Spec.ExpirationSeconds
	}
	if exp < 600 || exp > 1<<32 {
		return apierrors.NewInvalid(treqGVK.GroupKind(), req.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration less than 10 minutes")})
	}
	client := rv.client.Load()
	if client == nil {
		return apierrors.NewServiceUnavailable("the server is starting")
	}
	sa, err := client.CoreV1().ServiceAccounts(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var bound *authn.BoundObject
	if ref := in.Spec.BoundObjectRef; ref != nil {
		switch ref.Kind {
		case "Pod":
			pod, err := client.CoreV1().Pods(req.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			bound = &authn.BoundObject{Pod: &authn.ObjectRef{Name: pod.Name, UID: string(pod.UID)}, Node: podNodeRef(ctx, client, pod)}
		case "Node":
			node, err := client.CoreV1().Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			bound = &authn.BoundObject{Node: &authn.ObjectRef{Name: node.Name, UID: string(node.UID)}}
		default:
			return apierrors.NewInvalid(treqGVK.GroupKind(), req.Name, field.ErrorList{
				field.NotSupported(field.NewPath("spec", "boundObjectRef", "kind"), ref.Kind, []string{"Pod", "Node"})})
		}
	}
	token, expiry, err := rv.sec.issuer.Issue(req.Namespace, req.Name, string(sa.UID), in.Spec.Audiences, time.Duration(exp)*time.Second, bound)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	in.TypeMeta = metav1.TypeMeta{Kind: "TokenRequest", APIVersion: "authentication.k8s.io/v1"}
	in.Name, in.Namespace = req.Name, req.Namespace
	in.Spec.ExpirationSeconds = &exp
	if len(in.Spec.Audiences) == 0 {
		in.Spec.Audiences = []string{authn.DefaultIssuer}
	}
	in.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(expiry)}
	apiserver.WriteObject(w, http.StatusCreated, &in)
	return nil
}
