package scheduler

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/testutil"
)

// TestNodeAffinityAgreesWithDaemonSet runs the cases the DaemonSet
// controller's node matching runs too (see testutil.AffinityCases).
func TestNodeAffinityAgreesWithDaemonSet(t *testing.T) {
	for _, tc := range testutil.AffinityCases() {
		t.Run(tc.Name, func(t *testing.T) {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
				Spec:       v1.PodSpec{NodeSelector: tc.NodeSelector, Affinity: tc.Affinity},
			}
			reasons := filterNodeAffinity(pod, newNodeInfo(tc.Node))
			if got := len(reasons) == 0; got != tc.Match {
				t.Errorf("fits = %v (reasons %q), want %v", got, reasons, tc.Match)
			}
			if len(reasons) > 0 && reasons[0] != reasonNodeAffinity {
				t.Errorf("reason = %q, want %q", reasons[0], reasonNodeAffinity)
			}
		})
	}
}
