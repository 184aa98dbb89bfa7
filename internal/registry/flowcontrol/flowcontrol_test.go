package flowcontrol

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// makeFlowSchema is the conformance spec's template, changed by mutate.
func makeFlowSchema(mutate func(*flowcontrolv1.FlowSchema)) *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-example-fs", CreationTimestamp: metav1.NewTime(created)},
		Spec: flowcontrolv1.FlowSchemaSpec{
			MatchingPrecedence:         10000,
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "someone"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	if mutate != nil {
		mutate(fs)
	}
	return fs
}

func TestValidateFlowSchema(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*flowcontrolv1.FlowSchema)
		want   []string
	}{
		{name: "conformance template"},
		{name: "precedence 1", mutate: func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 1 },
			want: []string{"spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"}},
		{name: "precedence too high", mutate: func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 10001 },
			want: []string{"spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"}},
		{name: "no priority level", mutate: func(fs *flowcontrolv1.FlowSchema) { fs.Spec.PriorityLevelConfiguration.Name = "" },
			want: []string{"spec.priorityLevelConfiguration.name: Required value: must reference a priority level"}},
		{name: "bad distinguisher", mutate: func(fs *flowcontrolv1.FlowSchema) { fs.Spec.DistinguisherMethod.Type = "ByColour" },
			want: []string{`spec.distinguisherMethod.type: Unsupported value: {"type":"ByColour"}: supported values: "ByNamespace", "ByUser"`}},
		{name: "subject mixups", mutate: func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].Subjects = []flowcontrolv1.Subject{
				{Kind: flowcontrolv1.SubjectKindUser, Group: &flowcontrolv1.GroupSubject{Name: "g"}},
				{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: "*"}},
				{Kind: "Robot"},
			}
		}, want: []string{
			"spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
			"spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
			"spec.rules[0].subjects[1].serviceAccount.namespace: Required value: must specify namespace for service account",
			`spec.rules[0].subjects[2].kind: Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User"`,
		}},
		{name: "rules", mutate: func(fs *flowcontrolv1.FlowSchema) {
			fs.Spec.Rules[0].NonResourceRules = []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get", "fly"}, NonResourceURLs: []string{"healthz", "/a/*/b"}}}
			fs.Spec.Rules[0].ResourceRules = []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*", "get"}, APIGroups: []string{"*", "apps"}, Resources: []string{"pods"}}}
		}, want: []string{
			"spec.rules[0].resourceRules[0].verbs: Invalid value: [\"*\",\"get\"]: if '*' is present, must not specify other verbs",
			"spec.rules[0].resourceRules[0].apiGroups: Invalid value: [\"*\",\"apps\"]: if '*' is present, must not specify other api groups",
			"spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace",
			`spec.rules[0].nonResourceRules[0].verbs: Unsupported value: ["get","fly"]: supported values: "create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"`,
			`spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: "healthz": must start with slash`,
			`spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: "/a/*/b": wildcard can only do suffix matching`,
		}},
		{name: "duplicate condition", mutate: func(fs *flowcontrolv1.FlowSchema) {
			fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling"}, {Type: "Dangling"}}
		}, want: []string{`status.conditions[1].type: Duplicate value: "Dangling"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(ValidateFlowSchema(makeFlowSchema(tc.mutate)))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlowSchemaDefaultsAndRow(t *testing.T) {
	r := FlowSchemaResource()
	fs := makeFlowSchema(func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 0 })
	r.Default(fs)
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Errorf("matchingPrecedence defaulted to %d, want 1000", fs.Spec.MatchingPrecedence)
	}
	if diff := cmp.Diff([]interface{}{"e2e-example-fs", "global-default", int64(1000), "ByUser", "5m", "?"}, r.Row(fs, created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse}}
	if got := r.Row(fs, created)[5]; got != "False" {
		t.Errorf("MissingPL = %v, want False", got)
	}
	if r.Status == nil || !r.TrackGeneration {
		t.Error("FlowSchema has a status subresource and a generation")
	}
}

func TestMandatoryObjectsFixed(t *testing.T) {
	for _, fs := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
		fs := fs.DeepCopy()
		DefaultFlowSchema(fs)
		if errs := ValidateFlowSchema(fs); len(errs) != 0 {
			t.Errorf("bootstrap FlowSchema %s: %v", fs.Name, errs)
		}
	}
	for _, pl := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
		pl := pl.DeepCopy()
		DefaultPriorityLevelConfiguration(pl)
		if errs := ValidatePriorityLevelConfiguration(pl); len(errs) != 0 {
			t.Errorf("bootstrap PriorityLevelConfiguration %s: %v", pl.Name, errs)
		}
	}
	catchAll := bootstrap.MandatoryFlowSchemaCatchAll.DeepCopy()
	catchAll.Spec.MatchingPrecedence = 9000
	if got := errStrings(ValidateFlowSchema(catchAll)); len(got) != 1 || !strings.HasSuffix(got[0], "spec of 'catch-all' must equal the fixed value") {
		t.Errorf("changed catch-all FlowSchema: %q", got)
	}
	exempt := bootstrap.MandatoryPriorityLevelConfigurationExempt.DeepCopy()
	DefaultPriorityLevelConfiguration(exempt)
	exempt.Spec.Exempt.NominalConcurrencyShares = new(int32(5))
	if errs := ValidatePriorityLevelConfiguration(exempt); len(errs) != 0 {
		t.Errorf("exempt's spec.exempt may change: %v", errs)
	}
	catchAllPL := bootstrap.MandatoryPriorityLevelConfigurationCatchAll.DeepCopy()
	DefaultPriorityLevelConfiguration(catchAllPL)
	*catchAllPL.Spec.Limited.NominalConcurrencyShares = 50
	if got := errStrings(ValidatePriorityLevelConfiguration(catchAllPL)); len(got) != 1 || !strings.HasSuffix(got[0], "spec of 'catch-all' must equal the fixed value") {
		t.Errorf("changed catch-all level: %q", got)
	}
}

func makeLevel(mutate func(*flowcontrolv1.PriorityLevelConfiguration)) *flowcontrolv1.PriorityLevelConfiguration {
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-example-pl", CreationTimestamp: metav1.NewTime(created)},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: new(int32(2)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}},
	}
	if mutate != nil {
		mutate(pl)
	}
	DefaultPriorityLevelConfiguration(pl)
	return pl
}

func TestValidatePriorityLevelConfiguration(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*flowcontrolv1.PriorityLevelConfiguration)
		want   []string
	}{
		{name: "conformance template"},
		{name: "queuing", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{}}
		}},
		{name: "queuing missing", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Type = flowcontrolv1.LimitResponseTypeQueue
		}, want: []string{"spec.limited.limitResponse.queuing: Required value: must not be empty if limited.limitResponse.type is Limited"}},
		{name: "hand larger than queues", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 5, QueueLengthLimit: 1}}
		}, want: []string{"spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)"}},
		{name: "too much entropy", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 10000000, HandSize: 100, QueueLengthLimit: 1}}
		}, want: []string{"spec.limited.limitResponse.queuing.handSize: Invalid value: 100: required entropy bits of deckSize 10000000 and handSize 100 should not be greater than 60"}},
		{name: "percentages", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LendablePercent = new(int32(101))
			pl.Spec.Limited.BorrowingLimitPercent = new(int32(-1))
		}, want: []string{"spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
			"spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer"}},
		{name: "exempt by another name", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec = flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt}
		}, want: []string{`spec.type: Invalid value: "Exempt": must be 'Exempt' if and only if ` + "`name`" + ` is 'exempt'`}},
		{name: "no type", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec = flowcontrolv1.PriorityLevelConfigurationSpec{}
		},
			want: []string{"spec.type: Required value"}},
		{name: "v1beta3 annotation", mutate: func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Annotations = map[string]string{"flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares": ""}
		}, want: []string{"metadata.annotations: Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(ValidatePriorityLevelConfiguration(makeLevel(tc.mutate)))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPriorityLevelDefaultsAndRow(t *testing.T) {
	r := PriorityLevelConfigurationResource()
	pl := makeLevel(func(pl *flowcontrolv1.PriorityLevelConfiguration) {
		pl.Spec.Limited.NominalConcurrencyShares = nil
		pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{}}
	})
	if diff := cmp.Diff([]interface{}{"e2e-example-pl", "Limited", int64(30), int64(64), int64(8), int64(50), "5m"}, r.Row(pl, created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if *pl.Spec.Limited.LendablePercent != 0 {
		t.Error("lendablePercent not defaulted to 0")
	}
	exempt := bootstrap.MandatoryPriorityLevelConfigurationExempt.DeepCopy()
	if diff := cmp.Diff([]interface{}{"exempt", "Exempt", "<none>", "<none>", "<none>", "<none>", "<unknown>"}, r.Row(exempt, created)); diff != "" {
		t.Errorf("exempt row (-want +got):\n%s", diff)
	}
}
