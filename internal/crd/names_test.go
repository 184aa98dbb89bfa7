package crd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestAcceptNames runs the naming controller's judgement on the names other
// definitions of the group have accepted: free names and the definition's own are
// accepted, a taken one keeps the previously accepted value and names its conflict in
// the condition (the last one found, as upstream).
func TestAcceptNames(t *testing.T) {
	requested := apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", ShortNames: []string{"wd"},
		Kind: "Widget", ListKind: "WidgetList", Categories: []string{"all"}}
	for _, tc := range []struct {
		name           string
		accepted       apiextv1.CustomResourceDefinitionNames
		resources      []string
		kinds          []string
		want           apiextv1.CustomResourceDefinitionNames
		status, reason string
		message        string
	}{
		{name: "all free", want: requested, status: "True", reason: "NoConflicts", message: "no conflicts found"},
		{name: "plural taken", resources: []string{"widgets"},
			want:   apiextv1.CustomResourceDefinitionNames{Singular: "widget", ShortNames: []string{"wd"}, Kind: "Widget", ListKind: "WidgetList", Categories: []string{"all"}},
			status: "False", reason: "PluralConflict", message: `"widgets" is already in use`},
		{name: "own names stay accepted", accepted: requested, resources: []string{"gadgets"}, want: requested,
			status: "True", reason: "NoConflicts", message: "no conflicts found"},
		{name: "short names taken", resources: []string{"wd"},
			want:   apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", Categories: []string{"all"}},
			status: "False", reason: "ShortNamesConflict", message: `"wd" is already in use`},
		{name: "kind and list kind taken, the last reported", kinds: []string{"Widget", "WidgetList"},
			want:   apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", ShortNames: []string{"wd"}, Categories: []string{"all"}},
			status: "False", reason: "ListKindConflict", message: `"WidgetList" is already in use`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cond := acceptNames(requested, tc.accepted, sets.New(tc.resources...), sets.New(tc.kinds...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("accepted names (-want +got):\n%s", diff)
			}
			if string(cond.Status) != tc.status || cond.Reason != tc.reason || cond.Message != tc.message {
				t.Errorf("condition %s/%s %q, want %s/%s %q", cond.Status, cond.Reason, cond.Message, tc.status, tc.reason, tc.message)
			}
		})
	}
}
