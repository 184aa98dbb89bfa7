package apiserver

import (
	"testing"
	"time"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/storage/memory"
)

func TestUpgradeCreateCheck(t *testing.T) {
	api, err := New(Config{Storage: memory.New(time.Second), Resources: []registry.Resource{core.NamespaceResource(), core.PodResource()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	for _, tc := range []struct {
		req  Request
		want bool
	}{
		{Request{Verb: "get", Resource: "pods", Subresource: "exec"}, true},
		{Request{Verb: "get", Resource: "pods", Subresource: "attach"}, true},
		{Request{Verb: "get", Resource: "pods", Subresource: "portforward"}, true},
		{Request{Verb: "create", Resource: "pods", Subresource: "exec"}, false},
		{Request{Verb: "get", Resource: "pods", Subresource: "log"}, false},
		{Request{Verb: "get", APIGroup: "example.com", Resource: "pods", Subresource: "exec"}, false},
	} {
		got, ok := api.upgradeCreateCheck(tc.req)
		if ok != tc.want || (ok && got.Verb != "create") {
			t.Errorf("%+v: %+v %v, want extra check %v", tc.req, got, ok, tc.want)
		}
	}
}
