// Package authn decides who sent an API request: client certificates issued by the
// cluster CA, service account tokens (ES256 JWTs shaped like Kubernetes' bound tokens),
// static bearer tokens from a CSV file, and impersonation headers on top of any of them.
// Nothing here does I/O on the request path except through injected getters.
package authn

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Well-known user and group names, as Kubernetes spells them.
const (
	UserAnonymous        = "system:anonymous"
	GroupAuthenticated   = "system:authenticated"
	GroupUnauthenticated = "system:unauthenticated"
	GroupMasters         = "system:masters"
	GroupNodes           = "system:nodes"
	// NodeUserPrefix starts the user name of a node agent: system:node:NAME.
	NodeUserPrefix = "system:node:"
	// GroupServiceAccounts holds every service account; each namespace adds its own
	// group GroupServiceAccounts + ":" + namespace.
	GroupServiceAccounts = "system:serviceaccounts"
	// ServiceAccountUserPrefix starts a service account's user name:
	// system:serviceaccount:NAMESPACE:NAME.
	ServiceAccountUserPrefix = "system:serviceaccount:"
)

// User is an authenticated identity. Groups and Extra are what authorizers see; UID
// identifies the object behind the user (a service account's uid) when there is one.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether u is a member of group. A nil user is in no group.
func (u *User) InGroup(group string) bool {
	return u != nil && slices.Contains(u.Groups, group)
}

// Authenticator finds the user behind a request. It returns (user, true, nil) when
// the request carries credentials it accepts, (nil, false, nil) when the request
// carries none it understands, and (nil, false, err) when it carries credentials of
// its kind that are invalid (expired, badly signed, for a deleted account, ...).
type Authenticator interface {
	Authenticate(r *http.Request) (*User, bool, error)
}

// TokenAuthenticator checks a bearer token on its own, as TokenReview needs.
type TokenAuthenticator interface {
	AuthenticateToken(token string) (*User, bool, error)
}

// Anonymous returns the user of a request without credentials. The API server answers
// such requests with 401 Unauthorized except on /healthz, /livez, /readyz and
// /version, where authorization decides.
func Anonymous() *User {
	return &User{Name: UserAnonymous, Groups: []string{GroupUnauthenticated}}
}

// Union tries its authenticators in order and returns the first user found, with
// group system:authenticated added. When none answers it returns (nil, false, err)
// with every error met, or (nil, false, nil) when there were none.
type Union []Authenticator

// Authenticate implements Authenticator.
func (u Union) Authenticate(r *http.Request) (*User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.Authenticate(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok && user != nil {
			return withAuthenticatedGroup(user), true, nil
		}
	}
	return nil, false, errors.Join(errs...)
}

// withAuthenticatedGroup returns user with system:authenticated added unless it is
// anonymous or already carries system:authenticated or system:unauthenticated.
func withAuthenticatedGroup(user *User) *User {
	if user.Name == UserAnonymous || user.InGroup(GroupAuthenticated) || user.InGroup(GroupUnauthenticated) {
		return user
	}
	out := *user
	out.Groups = append(slices.Clip(slices.Clone(user.Groups)), GroupAuthenticated)
	return &out
}

// BearerToken returns the token of an "Authorization: Bearer TOKEN" header.
func BearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != "" && !strings.ContainsAny(token, " \t")
}

// ServiceAccountUsername returns system:serviceaccount:NAMESPACE:NAME.
func ServiceAccountUsername(namespace, name string) string {
	return ServiceAccountUserPrefix + namespace + ":" + name
}

// ServiceAccountGroups returns the groups every service account of namespace is in.
func ServiceAccountGroups(namespace string) []string {
	return []string{GroupServiceAccounts, GroupServiceAccounts + ":" + namespace}
}

// SplitServiceAccountUsername parses system:serviceaccount:NAMESPACE:NAME; ok is false
// for any other user name, including ones whose namespace or name are not valid
// object names.
func SplitServiceAccountUsername(username string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(username, ServiceAccountUserPrefix)
	if !found {
		return "", "", false
	}
	namespace, name, found = strings.Cut(rest, ":")
	if !found || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	if len(apivalidation.ValidateNamespaceName(namespace, false)) > 0 || len(apivalidation.ValidateServiceAccountName(name, false)) > 0 {
		return "", "", false
	}
	return namespace, name, true
}

// Attributes is what an authorizer decides on: who (User) does what (Verb) to which
// resource or non-resource path. Package authz re-exports it as authz.Attributes; it
// lives here because impersonation has to build attributes too.
type Attributes struct {
	User *User
	// Verb is the Kubernetes verb (get, list, watch, create, update, patch, delete,
	// deletecollection, impersonate, ...) for resource requests, or the lowercased
	// HTTP method (get, post, put, ...) for non-resource requests.
	Verb                                                   string
	Namespace, APIGroup, APIVersion, Resource, Subresource string
	// Name is the object's name; empty for list, watch, create and deletecollection.
	Name string
	// Path is the request path of a non-resource request ("/metrics").
	Path string
	// ResourceRequest distinguishes API resources from non-resource URLs.
	ResourceRequest bool
	// FieldSelector holds a list, watch or deletecollection's parsed ?fieldSelector=.
	FieldSelector fields.Requirements
}

// htmlSanitizer keeps forbidden messages from looking like HTML, as Kubernetes does.
var htmlSanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// ForbiddenError returns the 403 status error Kubernetes answers when a is denied,
// e.g. `pods "x" is forbidden: User "u" cannot get resource "pods" in API group "" in
// the namespace "t1"`, with ": reason" appended when reason is not empty.
func (a Attributes) ForbiddenError(reason string) *apierrors.StatusError {
	msg := htmlSanitizer.Replace(a.forbiddenDetail())
	if reason != "" {
		msg += ": " + reason
	}
	var gr schema.GroupResource
	if a.ResourceRequest {
		gr = schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	}
	return apierrors.NewForbidden(gr, a.Name, errors.New(msg))
}

func (a Attributes) forbiddenDetail() string {
	username := ""
	if a.User != nil {
		username = a.User.Name
	}
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", username, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", username, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", username, a.Verb, resource, a.APIGroup)
}
