package authn

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Impersonation headers, as kubectl --as, --as-group, --as-uid and client-go send them.
const (
	HeaderImpersonateUser        = "Impersonate-User"
	HeaderImpersonateGroup       = "Impersonate-Group"
	HeaderImpersonateUID         = "Impersonate-Uid"
	HeaderImpersonateExtraPrefix = "Impersonate-Extra-"
)

// authenticationGroup is the API group of the userextras and uids impersonation
// resources.
const authenticationGroup = "authentication.k8s.io"

// Impersonate returns the user a request acts as. Without impersonation headers that
// is requester. Otherwise every requested part (user or service account, each group,
// each extra value, the uid) must be allowed by authorize for verb "impersonate" as
// Kubernetes checks it: resource users, groups or serviceaccounts (namespaced, by
// name) in the core group, userextras/KEY or uids in authentication.k8s.io. The
// first denied part yields a 403 *apierrors.StatusError worded as Kubernetes words
// it; groups, extras or a uid without a user yield a 500 as in Kubernetes. The
// resulting user gets the service account groups when it is a service account and no
// groups were requested, and system:authenticated unless it is anonymous or a
// requested group says otherwise. The caller should remove the impersonation headers
// before passing the request on.
func Impersonate(r *http.Request, requester *User, authorize func(Attributes) (bool, string, error)) (*User, error) {
	requests, err := impersonationRequests(r.Header)
	if err != nil {
		return nil, err
	}
	if len(requests) == 0 {
		return requester, nil
	}
	groupsRequested := len(r.Header.Values(HeaderImpersonateGroup)) > 0
	out := &User{}
	for _, req := range requests {
		attrs := Attributes{
			User:            requester,
			Verb:            "impersonate",
			Resource:        req.resource,
			Subresource:     req.extraKey,
			Namespace:       req.namespace,
			Name:            req.name,
			ResourceRequest: true,
		}
		switch req.resource {
		case "serviceaccounts":
			attrs.APIVersion = "v1"
			out.Name = ServiceAccountUsername(req.namespace, req.name)
			if !groupsRequested {
				out.Groups = ServiceAccountGroups(req.namespace)
			}
		case "users":
			attrs.APIVersion = "v1"
			out.Name = req.name
		case "groups":
			attrs.APIVersion = "v1"
			out.Groups = append(out.Groups, req.name)
		case "userextras":
			attrs.APIGroup, attrs.APIVersion = authenticationGroup, "v1"
			if out.Extra == nil {
				out.Extra = map[string][]string{}
			}
			out.Extra[req.extraKey] = append(out.Extra[req.extraKey], req.name)
		case "uids":
			attrs.APIGroup, attrs.APIVersion = authenticationGroup, "v1"
			out.UID = req.name
		}
		allowed, reason, err := authorize(attrs)
		if err != nil || !allowed {
			// As in Kubernetes an authorizer error denies without showing the error;
			// authorize is the place to log it.
			return nil, attrs.ForbiddenError(reason)
		}
	}
	if out.Name != UserAnonymous {
		if !slices.Contains(out.Groups, GroupAuthenticated) && !slices.Contains(out.Groups, GroupUnauthenticated) {
			out.Groups = append(out.Groups, GroupAuthenticated)
		}
	} else if !slices.Contains(out.Groups, GroupUnauthenticated) {
		out.Groups = append(out.Groups, GroupUnauthenticated)
	}
	return out, nil
}

// impersonationRequest is one part of an impersonation to authorize.
type impersonationRequest struct {
	resource, namespace, name, extraKey string
}

func (r impersonationRequest) String() string {
	switch {
	case r.namespace != "":
		return r.resource + " " + r.namespace + "/" + r.name
	case r.extraKey != "":
		return r.resource + "/" + r.extraKey + " " + r.name
	}
	return r.resource + " " + r.name
}

// impersonationRequests lists the parts of an impersonation in Kubernetes' order:
// user or service account, groups, extras (by key), uid.
func impersonationRequests(h http.Header) ([]impersonationRequest, error) {
	var out []impersonationRequest
	user := h.Get(HeaderImpersonateUser)
	if user != "" {
		if ns, name, ok := SplitServiceAccountUsername(user); ok {
			out = append(out, impersonationRequest{resource: "serviceaccounts", namespace: ns, name: name})
		} else {
			out = append(out, impersonationRequest{resource: "users", name: user})
		}
	}
	groups := h.Values(HeaderImpersonateGroup)
	for _, g := range groups {
		out = append(out, impersonationRequest{resource: "groups", name: g})
	}
	var extraHeaders []string
	for key := range h {
		if strings.HasPrefix(key, HeaderImpersonateExtraPrefix) {
			extraHeaders = append(extraHeaders, key)
		}
	}
	// Header maps iterate in random order; sorting makes the first denial stable.
	slices.Sort(extraHeaders)
	for _, header := range extraHeaders {
		key := unescapeExtraKey(strings.ToLower(header[len(HeaderImpersonateExtraPrefix):]))
		for _, value := range h[header] {
			out = append(out, impersonationRequest{resource: "userextras", name: value, extraKey: key})
		}
	}
	uid := h.Get(HeaderImpersonateUID)
	if uid != "" {
		out = append(out, impersonationRequest{resource: "uids", name: uid})
	}
	if user == "" && len(out) > 0 {
		return nil, apierrors.NewInternalError(fmt.Errorf("requested %v without impersonating a user", out))
	}
	return out, nil
}

// unescapeExtraKey decodes the percent-encoding clients apply to extra keys, which
// may contain characters that are not legal in header names (e.g. "/").
func unescapeExtraKey(key string) string {
	if k, err := url.PathUnescape(key); err == nil {
		return k
	}
	return key
}
