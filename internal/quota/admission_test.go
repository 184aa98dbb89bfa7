package quota

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tranche/tranche/internal/apiserver"
)

const ns = "team"

func makeQuota(name string, hard v1.ResourceList, used v1.ResourceList, mutate func(*v1.ResourceQuota)) *v1.ResourceQuota {
	q := &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1"},
		Spec:       v1.ResourceQuotaSpec{Hard: hard},
		Status:     v1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
	if mutate != nil {
		mutate(q)
	}
	return q
}

func makePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func withResources(requests, limits v1.ResourceList) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: requests, Limits: limits}
	}
}

func list(pairs ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// started returns a client holding objs and informers that have synced them.
func started(t *testing.T, objs ...runtime.Object) (*fake.Clientset, informers.SharedInformerFactory, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	f.Core().V1().ResourceQuotas().Informer()
	f.Core().V1().LimitRanges().Informer()
	return client, f, ctx
}

func create(resourceName, kind string, obj runtime.Object) *apiserver.AdmissionRequest {
	return &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate,
		Resource: v1.SchemeGroupVersion.WithResource(resourceName), Kind: v1.SchemeGroupVersion.WithKind(kind),
		Namespace: ns, Name: "x", Object: obj}
}

func ptr(s string) *string { return &s }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestResourceQuotaAdmission(t *testing.T) {
	tests := []struct {
		name     string
		quotas   []*v1.ResourceQuota
		req      *apiserver.AdmissionRequest
		wantErr  string
		wantUsed map[string]v1.ResourceList // quota name -> status.used after admission
	}{
		{
			name:     "pod fits and is charged",
			quotas:   []*v1.ResourceQuota{makeQuota("pods", list("pods", "2"), list("pods", "1"), nil)},
			req:      create("pods", "Pod", makePod("p", nil)),
			wantUsed: map[string]v1.ResourceList{"pods": list("pods", "2")},
		},
		{
			name:    "pod count exceeded",
			quotas:  []*v1.ResourceQuota{makeQuota("pods", list("pods", "1"), list("pods", "1"), nil)},
			req:     create("pods", "Pod", makePod("p", nil)),
			wantErr: `pods "x" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`,
		},
		{
			name:    "cpu requests exceeded",
			quotas:  []*v1.ResourceQuota{makeQuota("compute", list("requests.cpu", "1"), list("requests.cpu", "800m"), nil)},
			req:     create("pods", "Pod", makePod("p", withResources(list("cpu", "500m"), nil))),
			wantErr: `pods "x" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=800m, limited: requests.cpu=1`,
		},
		{
			name:    "limits not declared",
			quotas:  []*v1.ResourceQuota{makeQuota("compute", list("limits.cpu", "1", "limits.memory", "1Gi"), list("limits.cpu", "0", "limits.memory", "0"), nil)},
			req:     create("pods", "Pod", makePod("p", withResources(list("cpu", "100m"), nil))),
			wantErr: `pods "x" is forbidden: failed quota: compute: must specify limits.cpu for: c; limits.memory for: c`,
		},
		{
			name:    "status not computed yet",
			quotas:  []*v1.ResourceQuota{makeQuota("pods", list("pods", "1"), nil, nil)},
			req:     create("pods", "Pod", makePod("p", nil)),
			wantErr: `pods "x" is forbidden: status unknown for quota: pods, resources: pods`,
		},
		{
			name: "best-effort scope ignores a pod with requests",
			quotas: []*v1.ResourceQuota{makeQuota("be", list("pods", "0"), list("pods", "0"), func(q *v1.ResourceQuota) {
				q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}
			})},
			req: create("pods", "Pod", makePod("p", withResources(list("cpu", "100m"), nil))),
		},
		{
			name: "best-effort scope limits a best-effort pod",
			quotas: []*v1.ResourceQuota{makeQuota("be", list("pods", "0"), list("pods", "0"), func(q *v1.ResourceQuota) {
				q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}
			})},
			req:     create("pods", "Pod", makePod("p", nil)),
			wantErr: `pods "x" is forbidden: exceeded quota: be, requested: pods=1, used: pods=0, limited: pods=0`,
		},
		{
			name: "priority class scope selector",
			quotas: []*v1.ResourceQuota{makeQuota("prio", list("pods", "0"), list("pods", "0"), func(q *v1.ResourceQuota) {
				q.Spec.ScopeSelector = &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{{
					ScopeName: v1.ResourceQuotaScopePriorityClass, Operator: v1.ScopeSelectorOpIn, Values: []string{"high"}}}}
			})},
			req:     create("pods", "Pod", makePod("p", func(p *v1.Pod) { p.Spec.PriorityClassName = "high" })),
			wantErr: `pods "x" is forbidden: exceeded quota: prio, requested: pods=1, used: pods=0, limited: pods=0`,
		},
		{
			name: "cross-namespace pod affinity scope",
			quotas: []*v1.ResourceQuota{makeQuota("xns", list("pods", "0"), list("pods", "0"), func(q *v1.ResourceQuota) {
				q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeCrossNamespacePodAffinity}
			})},
			req: create("pods", "Pod", makePod("p", func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					TopologyKey: "kubernetes.io/hostname", NamespaceSelector: &metav1.LabelSelector{}}}}}
			})),
			wantErr: `pods "x" is forbidden: exceeded quota: xns, requested: pods=1, used: pods=0, limited: pods=0`,
		},
		{
			name: "cross-namespace pod affinity scope ignores same-namespace affinity",
			quotas: []*v1.ResourceQuota{makeQuota("xns", list("pods", "0"), list("pods", "0"), func(q *v1.ResourceQuota) {
				q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeCrossNamespacePodAffinity}
			})},
			req: create("pods", "Pod", makePod("p", func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					TopologyKey: "kubernetes.io/hostname"}}}}
			})),
		},
		{
			name: "terminating scope",
			quotas: []*v1.ResourceQuota{makeQuota("term", list("pods", "0"), list("pods", "0"), func(q *v1.ResourceQuota) {
				q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeTerminating}
			})},
			req: create("pods", "Pod", makePod("p", func(p *v1.Pod) {
				d := int64(60)
				p.Spec.ActiveDeadlineSeconds = &d
			})),
			wantErr: `pods "x" is forbidden: exceeded quota: term, requested: pods=1, used: pods=0, limited: pods=0`,
		},
		{
			name: "volume attributes class scope selector",
			quotas: []*v1.ResourceQuota{makeQuota("gold", list("persistentvolumeclaims", "0"), list("persistentvolumeclaims", "0"), func(q *v1.ResourceQuota) {
				q.Spec.ScopeSelector = &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{{
					ScopeName: v1.ResourceQuotaScopeVolumeAttributesClass, Operator: v1.ScopeSelectorOpIn, Values: []string{"gold"}}}}
			})},
			req: create("persistentvolumeclaims", "PersistentVolumeClaim", &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns},
				Spec: v1.PersistentVolumeClaimSpec{VolumeAttributesClassName: ptr("gold"), AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources: v1.VolumeResourceRequirements{Requests: list("storage", "1Gi")}}}),
			wantErr: `persistentvolumeclaims "x" is forbidden: exceeded quota: gold, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=0, limited: persistentvolumeclaims=0`,
		},
		{
			name:    "configmap object count",
			quotas:  []*v1.ResourceQuota{makeQuota("objects", list("configmaps", "1", "count/configmaps", "5"), list("configmaps", "1", "count/configmaps", "1"), nil)},
			req:     create("configmaps", "ConfigMap", &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}),
			wantErr: `configmaps "x" is forbidden: exceeded quota: objects, requested: configmaps=1, used: configmaps=1, limited: configmaps=1`,
		},
		{
			name:   "load balancer service",
			quotas: []*v1.ResourceQuota{makeQuota("svc", list("services", "5", "services.loadbalancers", "0"), list("services", "0", "services.loadbalancers", "0"), nil)},
			req: create("services", "Service", &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns},
				Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80}}}}),
			wantErr: `services "x" is forbidden: exceeded quota: svc, requested: services.loadbalancers=1, used: services.loadbalancers=0, limited: services.loadbalancers=0`,
		},
		{
			name:   "claim storage",
			quotas: []*v1.ResourceQuota{makeQuota("storage", list("requests.storage", "1Gi"), list("requests.storage", "0"), nil)},
			req: create("persistentvolumeclaims", "PersistentVolumeClaim", &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns},
				Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources: v1.VolumeResourceRequirements{Requests: list("storage", "2Gi")}}}),
			wantErr: `persistentvolumeclaims "x" is forbidden: exceeded quota: storage, requested: requests.storage=2Gi, used: requests.storage=0, limited: requests.storage=1Gi`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, q := range tc.quotas {
				objs = append(objs, q)
			}
			client, f, ctx := started(t, objs...)
			rq, err := NewResourceQuota(ctx, client, f)
			if err != nil {
				t.Fatal(err)
			}
			f.Start(ctx.Done())
			f.WaitForCacheSync(ctx.Done())
			_, err = rq.Validate(ctx, tc.req)
			if diff := cmp.Diff(tc.wantErr, errText(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			for name, want := range tc.wantUsed {
				q, err := client.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want.Pods().String(), q.Status.Used.Pods().String()); diff != "" {
					t.Errorf("quota %s used pods (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// TestResourceQuotaDryRun: a dry run is checked but charges nothing.
func TestResourceQuotaDryRun(t *testing.T) {
	client, f, ctx := started(t, makeQuota("pods", list("pods", "2"), list("pods", "0"), nil))
	rq, err := NewResourceQuota(ctx, client, f)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	req := create("pods", "Pod", makePod("p", nil))
	req.DryRun = true
	if _, err := rq.Validate(ctx, req); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("dry run wrote %s %s", a.GetVerb(), a.GetResource())
		}
	}
}

func TestLimitRanger(t *testing.T) {
	lr := &v1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: ns},
		Spec: v1.LimitRangeSpec{Limits: []v1.LimitRangeItem{
			{Type: v1.LimitTypeContainer,
				Min: list("cpu", "50m"), Max: list("cpu", "1", "memory", "1Gi"),
				Default: list("cpu", "500m", "memory", "500Mi"), DefaultRequest: list("cpu", "100m", "memory", "200Mi"),
				MaxLimitRequestRatio: list("cpu", "10")},
			{Type: v1.LimitTypePersistentVolumeClaim, Min: list("storage", "1Gi"), Max: list("storage", "5Gi")},
		}},
	}
	client, f, ctx := started(t, lr)
	l, err := NewLimitRanger(client, f)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())

	t.Run("defaults", func(t *testing.T) {
		pod := makePod("p", withResources(list("memory", "300Mi"), nil))
		req := create("pods", "Pod", pod)
		if err := l.Mutate(ctx, req); err != nil {
			t.Fatal(err)
		}
		got := pod.Spec.Containers[0].Resources
		want := v1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "300Mi"), Limits: list("cpu", "500m", "memory", "500Mi")}
		if diff := cmp.Diff(want.Requests.Cpu().String()+want.Requests.Memory().String()+want.Limits.Cpu().String()+want.Limits.Memory().String(),
			got.Requests.Cpu().String()+got.Requests.Memory().String()+got.Limits.Cpu().String()+got.Limits.Memory().String()); diff != "" {
			t.Errorf("resources (-want +got):\n%s", diff)
		}
		if pod.Annotations["kubernetes.io/limit-ranger"] == "" {
			t.Errorf("no kubernetes.io/limit-ranger annotation: %v", pod.Annotations)
		}
		if _, err := l.Validate(ctx, req); err != nil {
			t.Errorf("defaulted pod refused: %v", err)
		}
	})
	t.Run("a limit without request defaults the request", func(t *testing.T) {
		pod := makePod("p", withResources(list("memory", "150Mi"), list("cpu", "300m")))
		if err := l.Mutate(ctx, create("pods", "Pod", pod)); err != nil {
			t.Fatal(err)
		}
		got := pod.Spec.Containers[0].Resources
		if s := got.Requests.Cpu().String() + " " + got.Requests.Memory().String() + " " + got.Limits.Cpu().String() + " " + got.Limits.Memory().String(); s != "300m 150Mi 300m 500Mi" {
			t.Errorf("resources %s, want 300m 150Mi 300m 500Mi", s)
		}
	})
	for _, tc := range []struct {
		name string
		req  *apiserver.AdmissionRequest
		want string
	}{
		{"below min", create("pods", "Pod", makePod("p", withResources(list("cpu", "10m", "memory", "100Mi"), list("cpu", "50m", "memory", "100Mi")))),
			`pods "x" is forbidden: minimum cpu usage per Container is 50m, but request is 10m`},
		{"above max", create("pods", "Pod", makePod("p", withResources(list("cpu", "100m", "memory", "100Mi"), list("cpu", "2", "memory", "100Mi")))),
			`pods "x" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, cpu max limit to request ratio per Container is 10, but provided ratio is 20.000000]`},
		{"claim too big", create("persistentvolumeclaims", "PersistentVolumeClaim", &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns},
			Spec: v1.PersistentVolumeClaimSpec{Resources: v1.VolumeResourceRequirements{Requests: list("storage", "10Gi")}}}),
			`persistentvolumeclaims "x" is forbidden: maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi`},
		{"unrelated resource", create("configmaps", "ConfigMap", &v1.ConfigMap{}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Validate(ctx, tc.req)
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResourceQuotaAdmissionReadsUnsyncedQuotaLive: this server's informer still holds
// the quota as created, without status (the controller's first status write not
// delivered yet), while the stored quota has it. The create is charged against the
// stored status, not admitted uncharged as a quota without status.hard would let it be.
func TestResourceQuotaAdmissionReadsUnsyncedQuotaLive(t *testing.T) {
	stored := makeQuota("objects", list("configmaps", "2"), list("configmaps", "1"), nil)
	cached := stored.DeepCopy()
	cached.Status = v1.ResourceQuotaStatus{}
	_, f, ctx := started(t, cached)
	client := fake.NewClientset(stored)
	rq, err := NewResourceQuota(ctx, client, f)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	cm := func(name string) *apiserver.AdmissionRequest {
		return create("configmaps", "ConfigMap", &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	if _, err := rq.Validate(ctx, cm("a")); err != nil {
		t.Fatalf("first config map: %v", err)
	}
	q, err := client.CoreV1().ResourceQuotas(ns).Get(ctx, "objects", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Status.Used[v1.ResourceConfigMaps]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("used configmaps after the create: %s, want 2", got.String())
	}
}
