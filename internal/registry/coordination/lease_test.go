package coordination

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// makeLease returns a valid lease held by "node-1", changed by mutate.
func makeLease(mutate func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: "node-1", CreationTimestamp: metav1.NewTime(created)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       new("node-1"),
			LeaseDurationSeconds: new(int32(40)),
			LeaseTransitions:     new(int32(0)),
		},
	}
	if mutate != nil {
		mutate(l)
	}
	return l
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateLease(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*coordinationv1.Lease)
		want   []string
	}{
		{name: "valid"},
		{name: "empty spec", mutate: func(l *coordinationv1.Lease) { l.Spec = coordinationv1.LeaseSpec{} }},
		{name: "zero duration", mutate: func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(0)) },
			want: []string{"spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"}},
		{name: "negative transitions", mutate: func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = new(int32(-1)) },
			want: []string{"spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"}},
		{name: "known strategy with preferred holder", mutate: func(l *coordinationv1.Lease) {
			l.Spec.Strategy = new(coordinationv1.OldestEmulationVersion)
			l.Spec.PreferredHolder = new("node-2")
		}},
		{name: "qualified custom strategy", mutate: func(l *coordinationv1.Lease) {
			l.Spec.Strategy = new(coordinationv1.CoordinatedLeaseStrategy("example.com/mine"))
		}},
		{name: "unknown strategy", mutate: func(l *coordinationv1.Lease) {
			l.Spec.Strategy = new(coordinationv1.CoordinatedLeaseStrategy("Newest"))
		}, want: []string{`spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"`}},
		{name: "preferred holder without strategy", mutate: func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = new("node-2") },
			want: []string{"spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"}},
	}
	r := LeaseResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := makeLease(tc.mutate)
			got := errStrings(r.Validate(l))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("create errors (-want +got):\n%s", diff)
			}
			got = errStrings(r.ValidateUpdate(l, makeLease(nil)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("update errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeaseRow(t *testing.T) {
	r := LeaseResource()
	now := created.Add(10 * time.Second)
	tests := []struct {
		name   string
		mutate func(*coordinationv1.Lease)
		want   []interface{}
	}{
		{name: "held", want: []interface{}{"node-1", "node-1", "10s"}},
		{name: "free", mutate: func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }, want: []interface{}{"node-1", "", "10s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.Row(makeLease(tc.mutate), now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	var nilLease *coordinationv1.Lease
	if r.Row(nilLease, now) != nil || r.Validate(nilLease) != nil {
		t.Errorf("nil lease produced output")
	}
}
