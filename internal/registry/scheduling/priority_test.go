package scheduling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func makePod(mut func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if mut != nil {
		mut(p)
	}
	return p
}

func TestAdmitPodCreate(t *testing.T) {
	never := v1.PreemptNever
	high := makeClass("high", 1000, nil)
	quiet := makeClass("quiet", 500, func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = &never })
	def := makeClass("everyone", 7, func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true })
	type want struct {
		class    string
		priority int32
		policy   v1.PreemptionPolicy
		err      string
	}
	tests := []struct {
		name    string
		classes []*schedulingv1.PriorityClass
		mut     func(*v1.Pod)
		want    want
	}{
		{name: "no class, no default", classes: []*schedulingv1.PriorityClass{high},
			want: want{priority: 0, policy: v1.PreemptLowerPriority}},
		{name: "no class, the default's", classes: []*schedulingv1.PriorityClass{high, def},
			want: want{class: "everyone", priority: 7, policy: v1.PreemptLowerPriority}},
		{name: "named class", classes: []*schedulingv1.PriorityClass{high, def, quiet},
			mut:  func(p *v1.Pod) { p.Spec.PriorityClassName = "quiet" },
			want: want{class: "quiet", priority: 500, policy: v1.PreemptNever}},
		{name: "unknown class", classes: []*schedulingv1.PriorityClass{high},
			mut:  func(p *v1.Pod) { p.Spec.PriorityClassName = "nope" },
			want: want{class: "nope", err: "no PriorityClass with name nope was found"}},
		{name: "same priority given", classes: []*schedulingv1.PriorityClass{high},
			mut:  func(p *v1.Pod) { p.Spec.PriorityClassName, p.Spec.Priority = "high", ptr.To[int32](1000) },
			want: want{class: "high", priority: 1000, policy: v1.PreemptLowerPriority}},
		{name: "other priority given", classes: []*schedulingv1.PriorityClass{high},
			mut:  func(p *v1.Pod) { p.Spec.PriorityClassName, p.Spec.Priority = "high", ptr.To[int32](3) },
			want: want{class: "high", priority: 3, err: "the integer value of priority (3) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"}},
		{name: "other policy given", classes: []*schedulingv1.PriorityClass{high},
			mut:  func(p *v1.Pod) { p.Spec.PriorityClassName, p.Spec.PreemptionPolicy = "high", &never },
			want: want{class: "high", priority: 1000, policy: v1.PreemptNever, err: "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := makePod(tt.mut)
			err := AdmitPodCreate(pod, tt.classes)
			got := want{class: pod.Spec.PriorityClassName, priority: ptr.Deref(pod.Spec.Priority, 0), policy: ptr.Deref(pod.Spec.PreemptionPolicy, "")}
			if err != nil {
				got.err = err.Error()
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("admitted pod (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdmitPodUpdateKeepsPriority(t *testing.T) {
	old := makePod(func(p *v1.Pod) {
		p.Spec.Priority = ptr.To[int32](1000)
		p.Spec.PreemptionPolicy = ptr.To(v1.PreemptNever)
	})
	pod := makePod(nil)
	AdmitPodUpdate(pod, old)
	if ptr.Deref(pod.Spec.Priority, 0) != 1000 || ptr.Deref(pod.Spec.PreemptionPolicy, "") != v1.PreemptNever {
		t.Fatalf("update without priority: priority %v policy %v, want the old ones", pod.Spec.Priority, pod.Spec.PreemptionPolicy)
	}
}

func TestCheckGlobalDefault(t *testing.T) {
	def := makeClass("everyone", 7, func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true })
	other := makeClass("other", 8, func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true })
	plain := makeClass("plain", 9, nil)
	const refused = "PriorityClass everyone is already marked as default. Only one default can exist"
	tests := []struct {
		name    string
		pc      *schedulingv1.PriorityClass
		create  bool
		classes []*schedulingv1.PriorityClass
		want    string
	}{
		{name: "first default", pc: other, create: true, classes: []*schedulingv1.PriorityClass{plain}},
		{name: "second default", pc: other, create: true, classes: []*schedulingv1.PriorityClass{def}, want: refused},
		{name: "not a default", pc: plain, create: true, classes: []*schedulingv1.PriorityClass{def}},
		{name: "the default updated", pc: def, classes: []*schedulingv1.PriorityClass{def}},
		{name: "another made default", pc: other, classes: []*schedulingv1.PriorityClass{def}, want: refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := CheckGlobalDefault(tt.pc, tt.create, tt.classes); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckGlobalDefault = %q, want %q", got, tt.want)
			}
		})
	}
}
