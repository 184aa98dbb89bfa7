package server

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
	"github.com/tranche/tranche/internal/auth/authz"
	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/noderestriction"
	"github.com/tranche/tranche/internal/tombstone"
)

// publicPaths answer anonymous requests, as system:public-info-viewer allows.
var publicPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true, "/version": true,
	"/healthz/ping": true, "/livez/ping": true, "/readyz/ping": true}

// listers are the informer caches the authenticators and authorizers read; they are
// set once the API answers (the loopback client is system:masters, which needs none).
type listers struct {
	roles               rbaclisters.RoleLister
	roleBindings        rbaclisters.RoleBindingLister
	clusterRoles        rbaclisters.ClusterRoleLister
	clusterRoleBindings rbaclisters.ClusterRoleBindingLister
	serviceAccounts     corelisters.ServiceAccountLister
	pods                corelisters.PodLister
	nodes               corelisters.NodeLister
}

// security authenticates and authorizes every request (apiserver.Guard).
type security struct {
	authenticator authn.Authenticator
	authorizer    authz.Authorizer
	rbac          *authz.RBAC
	issuer        *authn.Issuer
	// nodeGraph tells the node authorizer which objects each node's pods use; the
	// pod and PersistentVolume informers of watchCaches keep it.
	nodeGraph *authz.NodeGraph
	// nodeRestriction is the NodeRestriction admission for nodes' writes.
	nodeRestriction *noderestriction.Plugin
	caches          atomic.Pointer[listers]
	bootstrapTokens bootstrapTokenAuth
}

var _ apiserver.Guard = (*security)(nil)

func newSecurity(cfg Config, ca *pki.CA, frontProxy *pki.FrontProxy) (*security, error) {
	key, err := pki.EnsureSigningKey(cfg.pkiDir())
	if err != nil {
		return nil, err
	}
	issuer, err := authn.NewIssuer(key, "")
	if err != nil {
		return nil, err
	}
	s := &security{issuer: issuer, nodeGraph: authz.NewNodeGraph()}
	chain := authn.Union{
		authn.NewRequestHeader([]*x509.Certificate{frontProxy.CA.Cert}, frontProxyHeaders),
		authn.NewClientCert(ca.Pool()),
		&authn.ServiceAccountTokens{Keys: []crypto.PublicKey{key.Public()}, Accounts: saGetter{s}, Pods: podGetter{s}, Nodes: nodeGetter{s}},
		&s.bootstrapTokens,
	}
	// Node join tokens (and any static token) come from DATA/tokens.csv when present.
	if tokens, err := authn.LoadStaticTokens(filepath.Join(cfg.DataDir, "tokens.csv")); err == nil {
		chain = append(chain, tokens)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	s.authenticator = chain
	s.nodeRestriction = noderestriction.New(userFrom, restrictionLookup{s})
	s.rbac = authz.NewRBAC(ruleSource{s})
	s.authorizer = authz.Union{authz.NewNodeAuthorizer(s.nodeGraph), s.rbac}
	return s, nil
}

// watchCaches starts the informers the guard reads and waits for them to sync.
func (s *security) watchCaches(ctx context.Context, f informers.SharedInformerFactory) error {
	l := &listers{
		roles:               f.Rbac().V1().Roles().Lister(),
		roleBindings:        f.Rbac().V1().RoleBindings().Lister(),
		clusterRoles:        f.Rbac().V1().ClusterRoles().Lister(),
		clusterRoleBindings: f.Rbac().V1().ClusterRoleBindings().Lister(),
		serviceAccounts:     f.Core().V1().ServiceAccounts().Lister(),
		pods:                f.Core().V1().Pods().Lister(),
		nodes:               f.Core().V1().Nodes().Lister(),
	}
	if err := s.feedNodeGraph(f); err != nil {
		return err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	s.caches.Store(l)
	return nil
}

type userKey struct{}

// userFrom returns the authenticated user of a request's context.
func userFrom(ctx context.Context) *authn.User {
	u, _ := ctx.Value(userKey{}).(*authn.User)
	return u
}

// requestUserName returns the name of a request's authenticated user ("" when none).
func requestUserName(ctx context.Context) string {
	if u := userFrom(ctx); u != nil {
		return u.Name
	}
	return ""
}

// Check implements apiserver.Guard.
func (s *security) Check(r *http.Request, req apiserver.Request) (*http.Request, error) {
	user, ok, err := s.authenticator.Authenticate(r)
	if err != nil {
		return nil, apierrors.NewUnauthorized(err.Error())
	}
	if !ok {
		if publicPaths[r.URL.Path] {
			return r.WithContext(context.WithValue(r.Context(), userKey{}, authn.Anonymous())), nil
		}
		if !anonymousAllowed(req) {
			return nil, apierrors.NewUnauthorized("Unauthorized")
		}
		user = authn.Anonymous()
	}
	user, err = authn.Impersonate(r, user, func(a authn.Attributes) (bool, string, error) {
		d, reason, err := s.authorizer.Authorize(r.Context(), a)
		return d == authz.Allow, reason, err
	})
	if err != nil {
		return nil, err
	}
	for h := range r.Header {
		if len(h) > 12 && http.CanonicalHeaderKey(h)[:12] == "Impersonate-" {
			r.Header.Del(h)
		}
	}
	attrs := authz.Attributes{User: user, Verb: req.Verb, Namespace: req.Namespace, APIGroup: req.APIGroup, APIVersion: req.APIVersion,
		Resource: req.Resource, Subresource: req.Subresource, Name: req.Name, Path: req.Path, ResourceRequest: req.IsResourceRequest}
	withSelector(&attrs, r)
	d, reason, err := s.authorizer.Authorize(r.Context(), attrs)
	if err != nil && d != authz.Allow {
		return nil, apierrors.NewInternalError(err)
	}
	if d != authz.Allow {
		return nil, attrs.ForbiddenError(reason)
	}
	return r.WithContext(context.WithValue(r.Context(), userKey{}, user)), nil
}

// withSelector completes the attributes of a list, watch or deletecollection with its
// field selector, as kube-apiserver's request info does for authorizers that decide on
// selectors (the Node authorizer): a list or watch whose selector requires
// metadata.name=X is a request for X, a selector that does not parse has none (the
// request then fails with 400 in the handler).
func withSelector(a *authz.Attributes, r *http.Request) {
	switch a.Verb {
	case "list", "watch", "deletecollection":
	default:
		return
	}
	raw := r.URL.Query().Get("fieldSelector")
	if !a.ResourceRequest || raw == "" {
		return
	}
	sel, err := fields.ParseSelector(raw)
	if err != nil {
		return
	}
	if !watchViaPath(r.URL.Path) {
		a.FieldSelector = sel.Requirements()
	}
	if a.Name == "" && a.Verb != "deletecollection" {
		if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(path.IsValidPathSegmentName(name)) == 0 {
			a.Name = name
		}
	}
}

// watchViaPath reports a watch through the deprecated /watch/ path prefix
// (/api/v1/watch/..., /apis/G/V/watch/...), to which Kubernetes gives authorizers no
// selector: not every such endpoint honours one.
func watchViaPath(p string) bool {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) > 2 && parts[0] == "api":
		return parts[2] == "watch"
	case len(parts) > 3 && parts[0] == "apis":
		return parts[3] == "watch"
	}
	return false
}

// ruleSource reads RBAC objects from the caches (empty until they sync).
type ruleSource struct{ s *security }

func (rs ruleSource) l() *listers { return rs.s.caches.Load() }

func (rs ruleSource) ListClusterRoleBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	if l := rs.l(); l != nil {
		return l.clusterRoleBindings.List(labels.Everything())
	}
	return nil, nil
}

func (rs ruleSource) GetClusterRole(name string) (*rbacv1.ClusterRole, error) {
	if l := rs.l(); l != nil {
		return l.clusterRoles.Get(name)
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrole"}, name)
}

func (rs ruleSource) ListRoleBindings(ns string) ([]*rbacv1.RoleBinding, error) {
	if l := rs.l(); l != nil {
		return l.roleBindings.RoleBindings(ns).List(labels.Everything())
	}
	return nil, nil
}

func (rs ruleSource) GetRole(ns, name string) (*rbacv1.Role, error) {
	if l := rs.l(); l != nil {
		return l.roles.Roles(ns).Get(name)
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "role"}, name)
}

// lookup reads one object from the caches for the token and node authorizers; found
// is false when it does not exist, an error when the caches are not ready yet.
func lookup[T metav1.Object](s *security, get func(l *listers) (T, error)) (T, bool, error) {
	var zero T
	l := s.caches.Load()
	if l == nil {
		return zero, false, errors.New("authentication caches not ready")
	}
	obj, err := get(l)
	if apierrors.IsNotFound(err) {
		return zero, false, nil
	}
	if err != nil {
		return zero, false, err
	}
	return obj, true, nil
}

type saGetter struct{ s *security }

func (g saGetter) GetServiceAccountUID(ns, name string) (string, bool, error) {
	sa, ok, err := lookup(g.s, func(l *listers) (*v1.ServiceAccount, error) { return l.serviceAccounts.ServiceAccounts(ns).Get(name) })
	if !ok {
		return "", ok, err
	}
	return string(sa.UID), true, nil
}

type podGetter struct{ s *security }

func (g podGetter) GetPodUID(ns, name string) (string, bool, error) {
	p, ok, err := lookup(g.s, func(l *listers) (*v1.Pod, error) { return l.pods.Pods(ns).Get(name) })
	if !ok {
		return "", ok, err
	}
	return string(p.UID), true, nil
}

type nodeGetter struct{ s *security }

func (g nodeGetter) GetNodeUID(name string) (string, bool, error) {
	n, ok, err := lookup(g.s, func(l *listers) (*v1.Node, error) { return l.nodes.Get(name) })
	if !ok {
		return "", ok, err
	}
	return string(n.UID), true, nil
}

// feedNodeGraph keeps the node authorizer's graph from the pod and
// PersistentVolume informers of f (registered before f starts).
func (s *security) feedNodeGraph(f informers.SharedInformerFactory) error {
	g := s.nodeGraph
	pods := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setPod(g, obj) },
		UpdateFunc: func(_, obj any) { setPod(g, obj) },
		DeleteFunc: func(obj any) {
			if p := tombstone.As[*v1.Pod](obj); p != nil {
				g.DeletePod(p.Namespace, p.Name)
			}
		},
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(pods); err != nil {
		return fmt.Errorf("node graph: %w", err)
	}
	pvs := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setPV(g, obj) },
		UpdateFunc: func(_, obj any) { setPV(g, obj) },
		DeleteFunc: func(obj any) {
			if pv := tombstone.As[*v1.PersistentVolume](obj); pv != nil {
				g.DeletePV(pv.Name)
			}
		},
	}
	if _, err := f.Core().V1().PersistentVolumes().Informer().AddEventHandler(pvs); err != nil {
		return fmt.Errorf("node graph: %w", err)
	}
	return nil
}

func setPod(g *authz.NodeGraph, obj any) {
	if p, ok := obj.(*v1.Pod); ok {
		g.SetPod(p)
	}
}

func setPV(g *authz.NodeGraph, obj any) {
	if pv, ok := obj.(*v1.PersistentVolume); ok {
		g.SetPV(pv)
	}
}

// restrictionLookup answers NodeRestriction's reads from the caches.
type restrictionLookup struct{ s *security }

var _ noderestriction.Lookup = restrictionLookup{}

func (r restrictionLookup) Pod(ns, name string) (*v1.Pod, error) {
	l := r.s.caches.Load()
	if l == nil {
		return nil, errors.New("authorization caches not ready")
	}
	return l.pods.Pods(ns).Get(name)
}

func (r restrictionLookup) Node(name string) (*v1.Node, error) {
	l := r.s.caches.Load()
	if l == nil {
		return nil, errors.New("authorization caches not ready")
	}
	return l.nodes.Get(name)
}
