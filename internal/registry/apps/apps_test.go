package apps

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry/core"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func podTemplate(app string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "web", Image: "nginx:1.27"}, {Name: "side", Image: "busybox"}},
		},
	}
}

func makeDeployment(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate("web"),
		},
	}
	DefaultDeployment(d)
	if mutate != nil {
		mutate(d)
	}
	return d
}

func makeReplicaSet(mutate func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-5d4f", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Hour))},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate("web"),
		},
	}
	DefaultReplicaSet(rs)
	if mutate != nil {
		mutate(rs)
	}
	return rs
}

func makeDaemonSet(mutate func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", CreationTimestamp: metav1.NewTime(now.Add(-49 * time.Hour))},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: podTemplate("agent"),
		},
	}
	DefaultDaemonSet(ds)
	if mutate != nil {
		mutate(ds)
	}
	return ds
}

func makeStatefulSet(mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", CreationTimestamp: metav1.NewTime(now.Add(-10 * time.Minute))},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template:    podTemplate("db"),
		},
	}
	DefaultStatefulSet(s)
	if mutate != nil {
		mutate(s)
	}
	return s
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestDefaults(t *testing.T) {
	fs := v1.PersistentVolumeFilesystem
	cases := []struct {
		name string
		got  runtime.Object
		want runtime.Object
	}{
		{
			name: "deployment",
			got:  &appsv1.Deployment{},
			want: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
				Replicas: ptr[int32](1),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr(intstr.FromString("25%")), MaxSurge: ptr(intstr.FromString("25%")),
				}},
				RevisionHistoryLimit: ptr[int32](10), ProgressDeadlineSeconds: ptr[int32](600),
			}},
		},
		{
			name: "deployment recreate keeps no rolling update",
			got:  &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, Replicas: ptr[int32](0)}},
			want: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
				Replicas: ptr[int32](0), Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				RevisionHistoryLimit: ptr[int32](10), ProgressDeadlineSeconds: ptr[int32](600),
			}},
		},
		{
			name: "replicaset",
			got:  &appsv1.ReplicaSet{},
			want: &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](1)}},
		},
		{
			name: "daemonset",
			got:  &appsv1.DaemonSet{},
			want: &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr(intstr.FromInt32(1)), MaxSurge: ptr(intstr.FromInt32(0)),
				}},
				RevisionHistoryLimit: ptr[int32](10),
			}},
		},
		{
			name: "statefulset",
			got: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []v1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
			}}}},
			want: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr[int32](1),
				PodManagementPolicy: appsv1.OrderedReadyPodManagement,
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](0)}},
				RevisionHistoryLimit: ptr[int32](10),
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				},
				VolumeClaimTemplates: []v1.PersistentVolumeClaim{{
					// As kube-apiserver serves them (kubernetes#87583).
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec:       v1.PersistentVolumeClaimSpec{VolumeMode: &fs},
					Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
				}},
			}},
		},
		{
			name: "statefulset OnDelete gets no partition",
			got:  &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}},
			want: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
				Replicas: ptr[int32](1), PodManagementPolicy: appsv1.OrderedReadyPodManagement,
				UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
				RevisionHistoryLimit: ptr[int32](10),
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				},
			}},
		},
	}
	resources := map[string]func(runtime.Object){
		"*v1.Deployment": DeploymentResource().Default, "*v1.ReplicaSet": ReplicaSetResource().Default,
		"*v1.DaemonSet": DaemonSetResource().Default, "*v1.StatefulSet": StatefulSetResource().Default,
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resources[typeName(tc.got)](tc.got)
			// Pod template defaults belong to the core package; expect whatever it sets.
			core.DefaultPodSpec(templateSpec(tc.want))
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("defaults (-want +got):\n%s", diff)
			}
		})
	}
}

func templateSpec(o runtime.Object) *v1.PodSpec {
	switch o := o.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.ReplicaSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	}
	return &v1.PodSpec{}
}

func typeName(o runtime.Object) string {
	switch o.(type) {
	case *appsv1.Deployment:
		return "*v1.Deployment"
	case *appsv1.ReplicaSet:
		return "*v1.ReplicaSet"
	case *appsv1.DaemonSet:
		return "*v1.DaemonSet"
	}
	return "*v1.StatefulSet"
}

func TestValidateDeployment(t *testing.T) {
	cases := []struct {
		name string
		d    *appsv1.Deployment
		want []string
	}{
		{name: "valid", d: makeDeployment(nil)},
		{
			name: "no selector",
			d:    makeDeployment(func(d *appsv1.Deployment) { d.Spec.Selector = nil }),
			want: []string{
				"spec.selector: Required value",
				`spec.template.metadata.labels: Invalid value: {"app":"web"}: ` + "`selector` does not match template `labels`",
			},
		},
		{
			name: "empty selector",
			d:    makeDeployment(func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }),
			want: []string{"spec.selector: Invalid value: {}: empty selector is invalid for deployment"},
		},
		{
			name: "selector does not match template",
			d:    makeDeployment(func(d *appsv1.Deployment) { d.Spec.Selector.MatchLabels["app"] = "other" }),
			want: []string{`spec.template.metadata.labels: Invalid value: {"app":"web"}: ` + "`selector` does not match template `labels`"},
		},
		{
			name: "negative replicas",
			d:    makeDeployment(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr[int32](-1) }),
			want: []string{"spec.replicas: Invalid value: -1: must be greater than or equal to 0"},
		},
		{
			name: "restart policy Never",
			d:    makeDeployment(func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyNever }),
			want: []string{`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`},
		},
		{
			name: "active deadline",
			d:    makeDeployment(func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr[int64](5) }),
			want: []string{"spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported"},
		},
		{
			name: "surge and unavailable both zero",
			d: makeDeployment(func(d *appsv1.Deployment) {
				d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromString("0%"))}
			}),
			want: []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"},
		},
		{
			name: "percent above 100",
			d: makeDeployment(func(d *appsv1.Deployment) {
				d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromString("101%"))
			}),
			want: []string{`spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "101%": must not be greater than 100%`},
		},
		{
			name: "malformed percent",
			d: makeDeployment(func(d *appsv1.Deployment) {
				d.Spec.Strategy.RollingUpdate.MaxSurge = ptr(intstr.FromString("x%"))
			}),
			want: []string{`spec.strategy.rollingUpdate.maxSurge: Invalid value: "x%": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')`},
		},
		{
			name: "recreate with rolling update",
			d: makeDeployment(func(d *appsv1.Deployment) {
				d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
			}),
			want: []string{"spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"},
		},
		{
			name: "negative minReadySeconds",
			d:    makeDeployment(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = -1 }),
			want: []string{"spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"},
		},
		{
			name: "progress deadline not above minReadySeconds",
			d: makeDeployment(func(d *appsv1.Deployment) {
				d.Spec.MinReadySeconds = 600
			}),
			want: []string{"spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds"},
		},
	}
	r := DeploymentResource()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(tc.d))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdates(t *testing.T) {
	cases := []struct {
		name     string
		validate func(obj, old runtime.Object) field.ErrorList
		old, obj runtime.Object
		want     []string
	}{
		{
			name:     "deployment scale is fine",
			validate: DeploymentResource().ValidateUpdate,
			old:      makeDeployment(nil),
			obj:      makeDeployment(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr[int32](5) }),
		},
		{
			name:     "deployment selector immutable",
			validate: DeploymentResource().ValidateUpdate,
			old:      makeDeployment(nil),
			obj: makeDeployment(func(d *appsv1.Deployment) {
				d.Spec.Selector.MatchLabels["tier"] = "fe"
				d.Spec.Template.Labels["tier"] = "fe"
			}),
			want: []string{`spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"fe"}}: field is immutable`},
		},
		{
			name:     "replicaset selector immutable",
			validate: ReplicaSetResource().ValidateUpdate,
			old:      makeReplicaSet(nil),
			obj: makeReplicaSet(func(rs *appsv1.ReplicaSet) {
				rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}
			}),
			want: []string{`spec.selector: Invalid value: {"matchExpressions":[{"key":"app","operator":"Exists"}]}: field is immutable`},
		},
		{
			name:     "statefulset may change replicas, template, strategy",
			validate: StatefulSetResource().ValidateUpdate,
			old:      makeStatefulSet(nil),
			obj: makeStatefulSet(func(s *appsv1.StatefulSet) {
				s.Spec.Replicas = ptr[int32](3)
				s.Spec.Template.Spec.Containers[0].Image = "postgres:17"
				s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
				s.Spec.RevisionHistoryLimit = ptr[int32](2)
				s.Spec.MinReadySeconds = 5
			}),
		},
		{
			// bitnami's charts write the claim templates' apiVersion and kind; what was
			// stored (in protobuf) has none: applying the same manifest again is no change.
			name:     "statefulset claim template types are not a change",
			validate: StatefulSetResource().ValidateUpdate,
			old: makeStatefulSet(func(s *appsv1.StatefulSet) {
				s.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
			}),
			obj: makeStatefulSet(func(s *appsv1.StatefulSet) {
				s.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{
					TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}, ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
			}),
		},
		{
			name:     "statefulset claim templates are fixed",
			validate: StatefulSetResource().ValidateUpdate,
			old: makeStatefulSet(func(s *appsv1.StatefulSet) {
				s.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
			}),
			obj: makeStatefulSet(func(s *appsv1.StatefulSet) {
				s.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{
					TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}, ObjectMeta: metav1.ObjectMeta{Name: "other"}}}
			}),
			want: []string{"spec: Forbidden: " + statefulSetUpdateForbidden},
		},
		{
			name:     "statefulset serviceName is fixed",
			validate: StatefulSetResource().ValidateUpdate,
			old:      makeStatefulSet(nil),
			obj:      makeStatefulSet(func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" }),
			want:     []string{"spec: Forbidden: " + statefulSetUpdateForbidden},
		},
		{
			name:     "controllerrevision data immutable",
			validate: ControllerRevisionResource().ValidateUpdate,
			old:      &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a": 1}`)}, Revision: 1},
			obj:      &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a":2}`)}, Revision: 1},
			want:     []string{`data: Invalid value: {"a":2}: field is immutable`},
		},
		{
			name:     "controllerrevision data whitespace is no change",
			validate: ControllerRevisionResource().ValidateUpdate,
			old:      &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a": 1}`)}, Revision: 1},
			obj:      &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a":1}`)}, Revision: 1},
		},
		{
			name:     "deployment status counters",
			validate: DeploymentResource().Status.ValidateUpdate,
			old:      makeDeployment(func(d *appsv1.Deployment) { d.Status.CollisionCount = ptr[int32](2) }),
			obj: makeDeployment(func(d *appsv1.Deployment) {
				d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 2, CollisionCount: ptr[int32](1)}
			}),
			want: []string{
				"status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
				"status.collisionCount: Invalid value: 1: cannot be decremented",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(tc.validate(tc.obj, tc.old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateOthers(t *testing.T) {
	cases := []struct {
		name     string
		validate func(runtime.Object) field.ErrorList
		obj      runtime.Object
		want     []string
	}{
		{name: "valid replicaset", validate: ReplicaSetResource().Validate, obj: makeReplicaSet(nil)},
		{
			name: "replicaset empty selector", validate: ReplicaSetResource().Validate,
			obj:  makeReplicaSet(func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} }),
			want: []string{"spec.selector: Invalid value: {}: empty selector is invalid for deployment"},
		},
		{name: "valid daemonset", validate: DaemonSetResource().Validate, obj: makeDaemonSet(nil)},
		{
			name: "daemonset surge and unavailable", validate: DaemonSetResource().Validate,
			obj: makeDaemonSet(func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(1))
			}),
			want: []string{"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"},
		},
		{
			name: "daemonset neither surge nor unavailable", validate: DaemonSetResource().Validate,
			obj: makeDaemonSet(func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr(intstr.FromInt32(0))
			}),
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"},
		},
		{
			name: "daemonset restart policy", validate: DaemonSetResource().Validate,
			obj:  makeDaemonSet(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyOnFailure }),
			want: []string{`spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"`},
		},
		{name: "valid statefulset", validate: StatefulSetResource().Validate, obj: makeStatefulSet(nil)},
		{
			name: "statefulset without serviceName is fine", validate: StatefulSetResource().Validate,
			obj: makeStatefulSet(func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "" }),
		},
		{
			name: "statefulset bad policy", validate: StatefulSetResource().Validate,
			obj: makeStatefulSet(func(s *appsv1.StatefulSet) {
				s.Spec.PodManagementPolicy = "Random"
				s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = "Keep"
				s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1}
			}),
			want: []string{
				`spec.podManagementPolicy: Invalid value: "Random": must be 'OrderedReady' or 'Parallel'`,
				`spec.persistentVolumeClaimRetentionPolicy.whenScaled: Unsupported value: "Keep": supported values: "Retain", "Delete"`,
				"spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0",
			},
		},
		{
			name: "controllerrevision needs data", validate: ControllerRevisionResource().Validate,
			obj:  &appsv1.ControllerRevision{Revision: -1},
			want: []string{"data: Required value: data is mandatory", "revision: Invalid value: -1: must be greater than or equal to 0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(tc.validate(tc.obj))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDaemonSetTemplateGeneration(t *testing.T) {
	r := DaemonSetResource()
	ds := makeDaemonSet(nil)
	r.PrepareForCreate(ds)
	if got := ds.Annotations[TemplateGenerationAnnotation]; got != "1" {
		t.Fatalf("after create: %q, want 1", got)
	}
	same := ds.DeepCopy()
	same.Annotations[TemplateGenerationAnnotation] = "7"
	r.PrepareForUpdate(same, ds)
	if got := same.Annotations[TemplateGenerationAnnotation]; got != "1" {
		t.Errorf("unchanged template: %q, want 1", got)
	}
	changed := ds.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	r.PrepareForUpdate(changed, ds)
	if got := changed.Annotations[TemplateGenerationAnnotation]; got != "2" {
		t.Errorf("changed template: %q, want 2", got)
	}
}

func TestScale(t *testing.T) {
	type scaleState struct {
		Spec, Status int32
		Selector     string
	}
	cases := []struct {
		name string
		obj  runtime.Object
		get  func(runtime.Object) (int32, int32, string)
		set  func(runtime.Object, int32)
	}{
		{name: "deployment", obj: makeDeployment(func(d *appsv1.Deployment) { d.Status.Replicas = 1 }), get: DeploymentResource().Scale.Get, set: DeploymentResource().Scale.Set},
		{name: "replicaset", obj: makeReplicaSet(func(rs *appsv1.ReplicaSet) { rs.Status.Replicas = 1 }), get: ReplicaSetResource().Scale.Get, set: ReplicaSetResource().Scale.Set},
		{name: "statefulset", obj: makeStatefulSet(func(s *appsv1.StatefulSet) { s.Status.Replicas = 1 }), get: StatefulSetResource().Scale.Get, set: StatefulSetResource().Scale.Set},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.set(tc.obj, 4)
			spec, status, sel := tc.get(tc.obj)
			want := scaleState{4, 1, "app=" + map[string]string{"deployment": "web", "replicaset": "web", "statefulset": "db"}[tc.name]}
			if diff := cmp.Diff(want, scaleState{spec, status, sel}); diff != "" {
				t.Errorf("scale (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRows(t *testing.T) {
	owned := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-6b9f", CreationTimestamp: metav1.NewTime(now.Add(-5 * time.Minute)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr(true)}}},
		Revision: 3,
	}
	cases := []struct {
		name string
		row  func(runtime.Object, time.Time) []interface{}
		cols int
		obj  runtime.Object
		want []interface{}
	}{
		{
			name: "deployment", row: DeploymentResource().Row, cols: len(DeploymentResource().Columns),
			obj: makeDeployment(func(d *appsv1.Deployment) {
				d.Spec.Replicas = ptr[int32](3)
				d.Status = appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}
			}),
			want: []interface{}{"web", "2/3", int64(3), int64(2), "90s", "web,side", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "replicaset", row: ReplicaSetResource().Row, cols: len(ReplicaSetResource().Columns),
			obj:  makeReplicaSet(func(rs *appsv1.ReplicaSet) { rs.Status = appsv1.ReplicaSetStatus{Replicas: 1, ReadyReplicas: 1} }),
			want: []interface{}{"web-5d4f", int64(1), int64(1), int64(1), "3h", "web,side", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "daemonset", row: DaemonSetResource().Row, cols: len(DaemonSetResource().Columns),
			obj: makeDaemonSet(func(ds *appsv1.DaemonSet) {
				ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2}
			}),
			want: []interface{}{"agent", int64(3), int64(3), int64(2), int64(3), int64(2), "<none>", "2d1h", "web,side", "nginx:1.27,busybox", "app=agent"},
		},
		{
			name: "daemonset node selector", row: DaemonSetResource().Row, cols: len(DaemonSetResource().Columns),
			obj: makeDaemonSet(func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
			}),
			want: []interface{}{"agent", int64(0), int64(0), int64(0), int64(0), int64(0), "kubernetes.io/os=linux", "2d1h", "web,side", "nginx:1.27,busybox", "app=agent"},
		},
		{
			name: "statefulset", row: StatefulSetResource().Row, cols: len(StatefulSetResource().Columns),
			obj:  makeStatefulSet(func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas = 1 }),
			want: []interface{}{"db", "1/1", "10m", "web,side", "nginx:1.27,busybox"},
		},
		{
			name: "controllerrevision", row: ControllerRevisionResource().Row, cols: len(ControllerRevisionResource().Columns),
			obj:  owned,
			want: []interface{}{"agent-6b9f", "daemonset.apps/agent", int64(3), "5m"},
		},
		{
			name: "controllerrevision without owner", row: ControllerRevisionResource().Row, cols: len(ControllerRevisionResource().Columns),
			obj:  &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			want: []interface{}{"x", "<none>", int64(0), "<unknown>"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.row(tc.obj, now)
			if len(got) != tc.cols {
				t.Errorf("row has %d cells for %d columns", len(got), tc.cols)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReplicaSetFields(t *testing.T) {
	got := ReplicaSetResource().Fields(makeReplicaSet(func(rs *appsv1.ReplicaSet) { rs.Status.Replicas = 2 }))
	if diff := cmp.Diff("2", got["status.replicas"]); diff != "" {
		t.Errorf("status.replicas (-want +got):\n%s", diff)
	}
}

// FuzzValidateDeployment runs every Deployment hook on decoded input: none may panic.
func FuzzValidateDeployment(f *testing.F) {
	seeds, err := filepath.Glob("testdata/deployments/*.json")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed corpus: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	r := DeploymentResource()
	f.Fuzz(func(t *testing.T, data []byte) {
		var d, old appsv1.Deployment
		if json.Unmarshal(data, &d) != nil {
			return
		}
		raw := d.DeepCopy()
		r.Validate(raw)
		r.Row(raw, now)
		r.Scale.Get(raw)
		_ = json.Unmarshal(data, &old)
		r.PrepareForCreate(&d)
		r.Default(&d)
		r.Validate(&d)
		r.ValidateUpdate(&d, &old)
		r.ValidateUpdate(&old, &d)
		r.Status.ValidateUpdate(&d, &old)
		r.Row(&d, now)
		r.Scale.Set(&d, 2)
	})
}

// TestStatefulSetFromStorage: a statefulset read back from storage (protobuf, where an
// embedded TypeMeta has no field) carries its claim templates' apiVersion and kind
// again, as kube-apiserver serves it.
func TestStatefulSetFromStorage(t *testing.T) {
	res := StatefulSetResource()
	in := makeStatefulSet(func(s *appsv1.StatefulSet) {
		s.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	})
	res.Default(in)
	data, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var stored appsv1.StatefulSet
	if err := stored.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	if got := stored.Spec.VolumeClaimTemplates[0].TypeMeta; got != (metav1.TypeMeta{}) {
		t.Fatalf("protobuf kept the claim template's TypeMeta %v; the view is not needed", got)
	}
	out := res.Storage.FromStorage(&stored).(*appsv1.StatefulSet)
	if d := cmp.Diff(in.Spec, out.Spec); d != "" {
		t.Errorf("spec read back (-stored +served):\n%s", d)
	}
	if res.Storage.GVR != res.GVR() {
		t.Errorf("storage view %v, want the resource itself (%v)", res.Storage.GVR, res.GVR())
	}
}
