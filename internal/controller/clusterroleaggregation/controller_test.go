package clusterroleaggregation

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/tranche/tranche/internal/auth/authz"
	"github.com/tranche/tranche/internal/auth/bootstrap"
)

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func role(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func aggregated(name string, labels map[string]string, selectors ...metav1.LabelSelector) *rbacv1.ClusterRole {
	r := role(name, labels)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: selectors}
	return r
}

func matching(k, v string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func TestRules(t *testing.T) {
	x := map[string]string{"x": "true"}
	y := map[string]string{"y": "true"}
	xy := map[string]string{"x": "true", "y": "true"}
	tests := []struct {
		name    string
		role    *rbacv1.ClusterRole
		others  []*rbacv1.ClusterRole
		want    []rbacv1.PolicyRule
		wantErr bool
	}{
		{name: "nothing matches: empty, not nil", role: aggregated("agg", nil, matching("x", "true")),
			others: []*rbacv1.ClusterRole{role("a", y, rule("get", "pods"))}, want: []rbacv1.PolicyRule{}},
		{name: "matching roles in name order", role: aggregated("agg", nil, matching("x", "true")),
			others: []*rbacv1.ClusterRole{role("b", x, rule("get", "pods")), role("a", x, rule("list", "pods")), role("c", y, rule("get", "secrets"))},
			want:   []rbacv1.PolicyRule{rule("list", "pods"), rule("get", "pods")}},
		{name: "duplicates dropped", role: aggregated("agg", nil, matching("x", "true"), matching("y", "true")),
			others: []*rbacv1.ClusterRole{role("a", x, rule("get", "pods"), rule("get", "pods")), role("b", xy, rule("get", "pods")), role("c", y, rule("get", "pods"))},
			want:   []rbacv1.PolicyRule{rule("get", "pods")}},
		{name: "selector by selector, then name", role: aggregated("agg", nil, matching("y", "true"), matching("x", "true")),
			others: []*rbacv1.ClusterRole{role("a", x, rule("get", "a")), role("b", y, rule("get", "b"))},
			want:   []rbacv1.PolicyRule{rule("get", "b"), rule("get", "a")}},
		{name: "own rules and own labels ignored", role: func() *rbacv1.ClusterRole {
			r := aggregated("agg", x, matching("x", "true"))
			r.Rules = []rbacv1.PolicyRule{rule("*", "*")}
			return r
		}(), others: []*rbacv1.ClusterRole{role("a", x, rule("get", "pods"))}, want: []rbacv1.PolicyRule{rule("get", "pods")}},
		{name: "match expressions", role: aggregated("agg", nil, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "x", Operator: metav1.LabelSelectorOpExists}}}),
			others: []*rbacv1.ClusterRole{role("a", map[string]string{"x": "anything"}, rule("get", "pods")), role("b", y, rule("get", "b"))},
			want:   []rbacv1.PolicyRule{rule("get", "pods")}},
		{name: "aggregated role feeds with its stored rules", role: aggregated("top", nil, matching("x", "true")),
			others: []*rbacv1.ClusterRole{func() *rbacv1.ClusterRole {
				r := aggregated("mid", x, matching("y", "true"))
				r.Rules = []rbacv1.PolicyRule{rule("get", "stored")}
				return r
			}(), role("leaf", y, rule("get", "leaf"))},
			want: []rbacv1.PolicyRule{rule("get", "stored")}},
		{name: "invalid selector", role: aggregated("agg", nil, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "x", Operator: "Near"}}}), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Rules(tc.role, append([]*rbacv1.ClusterRole{tc.role}, tc.others...))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got == nil {
				t.Fatal("Rules returned nil")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBootstrapIsConverged: the rules the API server writes into admin, edit and view
// at bootstrap are what the controller computes, so starting a cluster does not make
// it rewrite them.
func TestBootstrapIsConverged(t *testing.T) {
	roles := bootstrap.ClusterRoles()
	all := make([]*rbacv1.ClusterRole, len(roles))
	for i := range roles {
		all[i] = &roles[i]
	}
	stored := make([]*rbacv1.ClusterRole, len(roles))
	for i := range roles {
		stored[i] = roles[i].DeepCopy()
		if stored[i].AggregationRule != nil {
			stored[i].Rules = authz.AggregateRules(&roles[i], all)
		}
	}
	checked := 0
	for _, r := range stored {
		if r.AggregationRule == nil {
			continue
		}
		checked++
		got, err := Rules(r, stored)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r.Rules, got); diff != "" {
			t.Errorf("%s (-bootstrap +controller):\n%s", r.Name, diff)
		}
	}
	if checked < 3 {
		t.Errorf("checked %d aggregated bootstrap roles, want admin, edit and view at least", checked)
	}
}

// TestController: a new labelled role reaches the aggregated role and, through it, a
// role aggregating that one; deleting it takes its rules away again.
func TestController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := kubefake.NewClientset(
		aggregated("top", nil, matching("to-top", "true")),
		aggregated("mid", map[string]string{"to-top": "true"}, matching("to-mid", "true")),
		role("base", map[string]string{"to-mid": "true"}, rule("get", "pods")),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(Config{Client: client, Informers: factory})
	factory.Start(ctx.Done())
	go c.Run(ctx, 2)

	waitRules := func(name string, want ...rbacv1.PolicyRule) {
		t.Helper()
		var got []rbacv1.PolicyRule
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			r, err := client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = r.Rules
			return cmp.Equal(want, got), nil
		})
		if err != nil {
			t.Fatalf("%s rules: %v\n(-want +got):\n%s", name, err, cmp.Diff(want, got))
		}
	}
	waitRules("mid", rule("get", "pods"))
	waitRules("top", rule("get", "pods"))

	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role("extra", map[string]string{"to-mid": "true"}, rule("list", "secrets")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRules("mid", rule("get", "pods"), rule("list", "secrets"))
	waitRules("top", rule("get", "pods"), rule("list", "secrets"))

	if err := client.RbacV1().ClusterRoles().Delete(ctx, "base", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRules("mid", rule("list", "secrets"))
	waitRules("top", rule("list", "secrets"))
}
