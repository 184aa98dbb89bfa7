package rbac

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func podReader() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
}

func TestValidatePolicyRules(t *testing.T) {
	tests := []struct {
		name     string
		rule     rbacv1.PolicyRule
		role     []string // errors for a Role
		cluster  []string // errors for a ClusterRole
		sameBoth bool
	}{
		{name: "resource rule", rule: podReader()},
		{name: "no verbs", rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}}, sameBoth: true,
			role: []string{"rules[0].verbs: Required value: verbs must contain at least one value"}},
		{name: "no api groups or resources", rule: rbacv1.PolicyRule{Verbs: []string{"get"}}, sameBoth: true,
			role: []string{
				"rules[0].apiGroups: Required value: resource rules must supply at least one api group",
				"rules[0].resources: Required value: resource rules must supply at least one resource",
			}},
		{name: "resource names with several resources", sameBoth: true,
			rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods", "secrets"}, ResourceNames: []string{"x"}},
			role: []string{"rules[0].resourceNames: Required value: resource names cannot apply to multiple resources"}},
		{name: "non-resource URLs", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
			role: []string{`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: namespaced rules cannot apply to non-resource URLs`}},
		{name: "non-resource URLs mixed with resources",
			rule: rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}, Resources: []string{"pods"}},
			role: []string{
				`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: namespaced rules cannot apply to non-resource URLs`,
				`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs`,
			},
			cluster: []string{`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sameBoth {
				tc.cluster = tc.role
			}
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Rules: []rbacv1.PolicyRule{tc.rule}}
			if diff := cmp.Diff(tc.role, errStrings(RoleResource().Validate(role))); diff != "" {
				t.Errorf("Role errors (-want +got):\n%s", diff)
			}
			cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Rules: []rbacv1.PolicyRule{tc.rule}}
			if diff := cmp.Diff(tc.cluster, errStrings(ClusterRoleResource().Validate(cr))); diff != "" {
				t.Errorf("ClusterRole errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateAggregationRule(t *testing.T) {
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view"}, AggregationRule: &rbacv1.AggregationRule{}}
	want := []string{"aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"}
	if diff := cmp.Diff(want, errStrings(ClusterRoleResource().Validate(cr))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	cr.AggregationRule.ClusterRoleSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.example.com/aggregate-to-view": "true"}}}
	if errs := ClusterRoleResource().Validate(cr); len(errs) != 0 {
		t.Errorf("valid aggregation rule: %v", errs)
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name   string
		prefix bool
		want   []string
	}{
		{name: "system:controller:endpointslice-controller"},
		{name: "Upper_Case.ok"},
		{name: "a/b", want: []string{"may not contain '/'"}},
		{name: "50%", want: []string{"may not contain '%'"}},
		{name: "..", want: []string{"may not be '..'"}},
		{name: "..", prefix: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ValidateName(tc.name, tc.prefix)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

// makeBinding returns a defaulted RoleBinding of ClusterRole view, changed by mutate.
func makeBinding(mutate func(*rbacv1.RoleBinding)) *rbacv1.RoleBinding {
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "viewers", CreationTimestamp: metav1.NewTime(created)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
			{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "dev"},
		},
	}
	if mutate != nil {
		mutate(b)
	}
	return b
}

// clusterBinding turns a RoleBinding made by makeBinding into a ClusterRoleBinding.
func clusterBinding(b *rbacv1.RoleBinding) *rbacv1.ClusterRoleBinding {
	meta := b.ObjectMeta
	meta.Namespace = ""
	return &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: b.RoleRef, Subjects: b.Subjects}
}

func TestValidateBindings(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*rbacv1.RoleBinding)
		binding []string // errors for a RoleBinding
		cluster []string // errors for a ClusterRoleBinding
	}{
		{name: "valid"},
		{name: "role ref to a Role", mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "Role" },
			cluster: []string{`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`}},
		{name: "unknown role kind", mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "Policy" },
			binding: []string{`roleRef.kind: Unsupported value: "Policy": supported values: "Role", "ClusterRole"`},
			cluster: []string{`roleRef.kind: Unsupported value: "Policy": supported values: "ClusterRole"`}},
		{name: "wrong role api group", mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.APIGroup = "example.com" },
			binding: []string{`roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"`},
			cluster: []string{`roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"`}},
		{name: "role name required", mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "" },
			binding: []string{"roleRef.name: Required value"},
			cluster: []string{"roleRef.name: Required value"}},
		{name: "role name with slash", mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "a/b" },
			binding: []string{`roleRef.name: Invalid value: "a/b": may not contain '/'`},
			cluster: []string{`roleRef.name: Invalid value: "a/b": may not contain '/'`}},
		{name: "service account without namespace", mutate: func(b *rbacv1.RoleBinding) { b.Subjects[1].Namespace = "" },
			cluster: []string{"subjects[1].namespace: Required value"}},
		{name: "service account with api group", mutate: func(b *rbacv1.RoleBinding) { b.Subjects[1].APIGroup = rbacv1.GroupName },
			binding: []string{`subjects[1].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""`},
			cluster: []string{`subjects[1].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""`}},
		{name: "bad service account name", mutate: func(b *rbacv1.RoleBinding) { b.Subjects[1].Name = "Default" },
			binding: []string{`subjects[1].name: Invalid value: "Default": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
			cluster: []string{`subjects[1].name: Invalid value: "Default": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "user without name", mutate: func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "" },
			binding: []string{"subjects[0].name: Required value", `subjects[0].name: Invalid value: "": user name cannot be empty`},
			cluster: []string{"subjects[0].name: Required value", `subjects[0].name: Invalid value: "": user name cannot be empty`}},
		{name: "group in the core group", mutate: func(b *rbacv1.RoleBinding) {
			b.Subjects[0] = rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "devs", APIGroup: "v1"}
		},
			binding: []string{`subjects[0].apiGroup: Unsupported value: "v1": supported values: "rbac.authorization.k8s.io"`},
			cluster: []string{`subjects[0].apiGroup: Unsupported value: "v1": supported values: "rbac.authorization.k8s.io"`}},
		{name: "unknown subject kind", mutate: func(b *rbacv1.RoleBinding) { b.Subjects[0].Kind = "Robot" },
			binding: []string{`subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`},
			cluster: []string{`subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := makeBinding(tc.mutate)
			if diff := cmp.Diff(tc.binding, errStrings(RoleBindingResource().Validate(b))); diff != "" {
				t.Errorf("RoleBinding errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.cluster, errStrings(ClusterRoleBindingResource().Validate(clusterBinding(b)))); diff != "" {
				t.Errorf("ClusterRoleBinding errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBindingRoleRefImmutable(t *testing.T) {
	changed := makeBinding(func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "edit" })
	want := []string{`roleRef: Invalid value: {"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"}: cannot change roleRef`}
	if diff := cmp.Diff(want, errStrings(RoleBindingResource().ValidateUpdate(changed, makeBinding(nil)))); diff != "" {
		t.Errorf("RoleBinding errors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, errStrings(ClusterRoleBindingResource().ValidateUpdate(clusterBinding(changed), clusterBinding(makeBinding(nil))))); diff != "" {
		t.Errorf("ClusterRoleBinding errors (-want +got):\n%s", diff)
	}
	subjectsChanged := makeBinding(func(b *rbacv1.RoleBinding) { b.Subjects = b.Subjects[:1] })
	if errs := RoleBindingResource().ValidateUpdate(subjectsChanged, makeBinding(nil)); len(errs) != 0 {
		t.Errorf("changing subjects: %v", errs)
	}
}

func TestDefaultBinding(t *testing.T) {
	b := makeBinding(func(b *rbacv1.RoleBinding) {
		b.RoleRef.APIGroup = ""
		b.Subjects = []rbacv1.Subject{
			{Kind: rbacv1.UserKind, Name: "alice"},
			{Kind: rbacv1.GroupKind, Name: "devs"},
			{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "dev"},
			{Kind: "Robot", Name: "r2"},
		}
	})
	RoleBindingResource().Default(b)
	want := makeBinding(func(b *rbacv1.RoleBinding) {
		b.Subjects = []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"},
			{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "dev"},
			{Kind: "Robot", Name: "r2"},
		}
	})
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	cb := clusterBinding(makeBinding(func(b *rbacv1.RoleBinding) { b.RoleRef.APIGroup = "" }))
	ClusterRoleBindingResource().Default(cb)
	if cb.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("ClusterRoleBinding roleRef.apiGroup = %q", cb.RoleRef.APIGroup)
	}
}

func TestTables(t *testing.T) {
	now := created.Add(75 * time.Minute)
	b := makeBinding(func(b *rbacv1.RoleBinding) {
		b.Subjects = append(b.Subjects,
			rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"},
			rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"})
	})
	wantBinding := []interface{}{"viewers", "ClusterRole/view", "75m", "alice, bob", "system:authenticated", "dev/default"}
	tests := []struct {
		name    string
		row     []interface{}
		want    []interface{}
		columns []string
		got     []metav1.TableColumnDefinition
	}{
		{name: "rolebinding", row: RoleBindingResource().Row(b, now), want: wantBinding,
			columns: []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}, got: RoleBindingResource().Columns},
		{name: "clusterrolebinding", row: ClusterRoleBindingResource().Row(clusterBinding(b), now), want: wantBinding,
			columns: []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}, got: ClusterRoleBindingResource().Columns},
		{name: "rolebinding without subjects", row: RoleBindingResource().Row(makeBinding(func(b *rbacv1.RoleBinding) { b.Subjects = nil }), now),
			want:    []interface{}{"viewers", "ClusterRole/view", "75m", "", "", ""},
			columns: []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}, got: RoleBindingResource().Columns},
		{name: "role", row: RoleResource().Row(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", CreationTimestamp: metav1.NewTime(created.In(time.FixedZone("CET", 3600)))}}, now),
			want: []interface{}{"pod-reader", "2026-01-02T03:04:05Z"}, columns: []string{"Name", "Created At"}, got: RoleResource().Columns},
		{name: "clusterrole", row: ClusterRoleResource().Row(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-view", CreationTimestamp: metav1.NewTime(created)}}, now),
			want: []interface{}{"system:aggregate-to-view", "2026-01-02T03:04:05Z"}, columns: []string{"Name", "Created At"}, got: ClusterRoleResource().Columns},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.row); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			var names []string
			wide := 0
			for _, c := range tc.got {
				names = append(names, c.Name)
				if c.Priority == 1 {
					wide++
				}
			}
			if diff := cmp.Diff(tc.columns, names); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			if len(tc.columns) == 6 && wide != 3 {
				t.Errorf("%d wide columns, want 3", wide)
			}
		})
	}
}

func TestRBACHooksTolerateForeignObjects(t *testing.T) {
	var role *rbacv1.Role
	rr, cr, rb, crb := RoleResource(), ClusterRoleResource(), RoleBindingResource(), ClusterRoleBindingResource()
	rb.Default(role)
	crb.Default(role)
	for _, errs := range []field.ErrorList{
		rr.Validate(nil), cr.Validate(role), rb.Validate(role), crb.Validate(role),
		rb.ValidateUpdate(role, role), crb.ValidateUpdate(role, role),
	} {
		if errs != nil {
			t.Errorf("foreign object gave %v", errs)
		}
	}
	if cr.Row(role, created) != nil || rb.Row(role, created) != nil || crb.Row(role, created) != nil {
		t.Errorf("foreign object produced a row")
	}
}
