package server

import (
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/tranche/tranche/internal/auth/authz"
)

// TestWithSelector: lists and watches carry their parsed field selector to the
// authorizers, and a metadata.name selector names the object, as kube-apiserver's
// request info does; other verbs and unparsable selectors carry none.
func TestWithSelector(t *testing.T) {
	cases := []struct {
		name, verb, path, query string
		wantName                string
		wantSelector            string
	}{
		{name: "list by node", verb: "list", query: "fieldSelector=spec.nodeName%3Dn1", wantSelector: "spec.nodeName=n1"},
		{name: "watch by name", verb: "watch", query: "watch=1&fieldSelector=metadata.name%3Dn1", wantName: "n1", wantSelector: "metadata.name=n1"},
		{name: "name and more", verb: "list", query: "fieldSelector=metadata.name%3Dn1,spec.unschedulable%3Dfalse", wantName: "n1",
			wantSelector: "metadata.name=n1,spec.unschedulable=false"},
		{name: "name that is no path segment", verb: "list", query: "fieldSelector=metadata.name%3D..", wantSelector: "metadata.name=.."},
		{name: "name excluded", verb: "list", query: "fieldSelector=metadata.name!%3Dn1", wantSelector: "metadata.name!=n1"},
		{name: "deletecollection keeps no name", verb: "deletecollection", query: "fieldSelector=metadata.name%3Dn1", wantSelector: "metadata.name=n1"},
		{name: "get ignores selectors", verb: "get", query: "fieldSelector=spec.nodeName%3Dn1"},
		{name: "watch via the path has a name but no selector", verb: "watch", path: "/api/v1/watch/nodes", query: "fieldSelector=metadata.name%3Dn1", wantName: "n1"},
		{name: "group watch via the path", verb: "watch", path: "/apis/apps/v1/watch/namespaces/t1/deployments", query: "fieldSelector=spec.nodeName%3Dn1"},
		{name: "unparsable", verb: "list", query: "fieldSelector=spec.nodeName"},
		{name: "none", verb: "list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := authz.Attributes{Verb: tc.verb, Resource: "nodes", ResourceRequest: true}
			p := tc.path
			if p == "" {
				p = "/api/v1/nodes"
			}
			withSelector(&a, httptest.NewRequest("GET", p+"?"+tc.query, nil))
			var want fields.Requirements
			if tc.wantSelector != "" {
				want = fields.ParseSelectorOrDie(tc.wantSelector).Requirements()
			}
			if diff := cmp.Diff(want, a.FieldSelector); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			if a.Name != tc.wantName {
				t.Errorf("name %q, want %q", a.Name, tc.wantName)
			}
		})
	}
}
