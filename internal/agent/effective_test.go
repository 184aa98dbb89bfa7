package agent

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEffectivePod: only a pod stored before the API server's ServiceAccount admission
// (no serviceAccountName) gets the default account and the kube-api-access volume from
// the agent; a pod naming its account runs as admitted, so an account's
// automountServiceAccountToken: false keeps its token out.
func TestEffectivePod(t *testing.T) {
	pod := func(sa string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"},
			Spec: v1.PodSpec{ServiceAccountName: sa, Containers: []v1.Container{{Name: "c"}}}}
	}
	legacy := effectivePod(pod(""))
	if legacy.Spec.ServiceAccountName != "default" || len(legacy.Spec.Volumes) != 1 ||
		!strings.HasPrefix(legacy.Spec.Volumes[0].Name, "kube-api-access-") || len(legacy.Spec.Containers[0].VolumeMounts) != 1 {
		t.Errorf("a pod without an account: %+v", legacy.Spec)
	}
	admitted := effectivePod(pod("quiet"))
	if admitted.Spec.ServiceAccountName != "quiet" || len(admitted.Spec.Volumes) != 0 || len(admitted.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("an admitted pod was changed: %+v", admitted.Spec)
	}
}
