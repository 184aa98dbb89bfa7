package hpa

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeMetrics answers PodMetrics with fixed items or an error, and counts the calls.
type fakeMetrics struct {
	items []metricsv1beta1.PodMetrics
	err   error
	calls int
}

var _ MetricsClient = (*fakeMetrics)(nil)

func (f *fakeMetrics) PodMetrics(_ context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var out []metricsv1beta1.PodMetrics
	for _, m := range f.items {
		if m.Namespace == namespace {
			out = append(out, m)
		}
	}
	return out, nil
}

// env is a controller on a fake clientset whose deployments/web scale subresource
// answers with replicas (updates change it), with pods in the informer cache.
type env struct {
	c        *Controller
	client   *fake.Clientset
	recorder *record.FakeRecorder
	metrics  *fakeMetrics
	hpas     cache.Indexer
	replicas int32
}

func newEnv(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, replicas int32, pods []*v1.Pod, metrics *fakeMetrics) *env {
	t.Helper()
	client := fake.NewClientset(hpa)
	e := &env{client: client, recorder: record.NewFakeRecorder(20), metrics: metrics, replicas: replicas}
	client.PrependReactor("get", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		if e.replicas < 0 {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web")
		}
		return true, makeScale(e.replicas), nil
	})
	client.PrependReactor("update", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s := a.(clienttesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		e.replicas = s.Spec.Replicas
		return true, s, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	e.c = New(Config{Client: client, Informers: factory, Metrics: metrics, Recorder: e.recorder,
		Clock: testingclock.NewFakeClock(now), Logger: slog.New(slog.DiscardHandler)})
	e.hpas = factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer()
	if err := e.hpas.Add(hpa); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// sync runs one sync of default/web and returns the client's actions, as "verb
// resource[/subresource]".
func (e *env) sync(t *testing.T) []string {
	t.Helper()
	e.client.ClearActions()
	if err := e.c.sync(context.Background(), "default/web"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	var out []string
	for _, a := range e.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// refresh puts the HPA the controller wrote into the informer cache, as the watch would.
func (e *env) refresh(t *testing.T) {
	t.Helper()
	h, err := e.client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.hpas.Update(h); err != nil {
		t.Fatal(err)
	}
}

// status is the last status the controller wrote.
func (e *env) status(t *testing.T) autoscalingv2.HorizontalPodAutoscalerStatus {
	t.Helper()
	h, err := e.client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h.Status
}

func TestSyncScalesUp(t *testing.T) {
	pods := []*v1.Pod{makePod("web-0", nil)}
	e := newEnv(t, makeHPA(nil), 1, pods, &fakeMetrics{items: cpuMetrics(150)})
	if diff := cmp.Diff([]string{"get deployments/scale", "update deployments/scale", "update horizontalpodautoscalers/status"}, e.sync(t)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if e.replicas != 3 {
		t.Errorf("scale = %d, want 3", e.replicas)
	}
	want := []string{"Normal SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target"}
	if diff := cmp.Diff(want, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	st := e.status(t)
	if st.CurrentReplicas != 1 || st.DesiredReplicas != 3 || st.LastScaleTime == nil || !st.LastScaleTime.Time.Equal(now) || deref(st.ObservedGeneration) != 1 {
		t.Errorf("status = %+v", st)
	}
	if len(st.CurrentMetrics) != 1 || *st.CurrentMetrics[0].Resource.Current.AverageUtilization != 150 || st.CurrentMetrics[0].Resource.Current.AverageValue.String() != "150m" {
		t.Errorf("current metrics = %+v", st.CurrentMetrics)
	}
	wantConds := map[string]condition{
		"AbleToScale":    {"True", "SucceededRescale", "the HPA controller was able to update the target scale to 3"},
		"ScalingActive":  {"True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"},
		"ScalingLimited": {"False", "DesiredWithinRange", msgWithinRange},
		"ScaledToZero":   {"False", "NotScaledToZero", "the HPA controller did not scale the workload to zero"},
	}
	if diff := cmp.Diff(wantConds, conditions(&autoscalingv2.HorizontalPodAutoscaler{Status: st})); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

func TestSyncWithoutMetricsAPI(t *testing.T) {
	notServed := errors.New("the server could not find the requested resource (get pods.metrics.k8s.io)")
	e := newEnv(t, makeHPA(nil), 1, []*v1.Pod{makePod("web-0", nil)}, &fakeMetrics{err: notServed})
	if diff := cmp.Diff([]string{"get deployments/scale", "update horizontalpodautoscalers/status"}, e.sync(t)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	cause := "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"
	want := []string{"Warning FailedGetResourceMetric " + cause,
		"Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: " + cause}
	if diff := cmp.Diff(want, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	st := e.status(t)
	got := conditions(&autoscalingv2.HorizontalPodAutoscaler{Status: st})["ScalingActive"]
	if diff := cmp.Diff(condition{"False", "FailedGetResourceMetric", "the HPA was unable to compute the replica count: " + cause}, got); diff != "" {
		t.Errorf("ScalingActive (-want +got):\n%s", diff)
	}
	if st.CurrentReplicas != 1 || st.DesiredReplicas != 0 || e.replicas != 1 {
		t.Errorf("status %+v, scale %d", st, e.replicas)
	}
	// Nothing changed: the next sync writes no status (the events repeat, and the
	// recorder folds them into counts).
	e.refresh(t)
	if diff := cmp.Diff([]string{"get deployments/scale"}, e.sync(t)); diff != "" {
		t.Errorf("second sync actions (-want +got):\n%s", diff)
	}
}

func TestSyncSteadyWritesNothing(t *testing.T) {
	pods := []*v1.Pod{makePod("web-0", nil), makePod("web-1", nil)}
	e := newEnv(t, makeHPA(nil), 2, pods, &fakeMetrics{items: cpuMetrics(50, 48)})
	if diff := cmp.Diff([]string{"get deployments/scale", "update horizontalpodautoscalers/status"}, e.sync(t)); diff != "" {
		t.Errorf("first sync (-want +got):\n%s", diff)
	}
	e.refresh(t)
	if diff := cmp.Diff([]string{"get deployments/scale"}, e.sync(t)); diff != "" {
		t.Errorf("steady sync (-want +got):\n%s", diff)
	}
	if ev := e.events(); len(ev) != 0 {
		t.Errorf("events: %v", ev)
	}
}

func TestSyncMissingTarget(t *testing.T) {
	e := newEnv(t, makeHPA(nil), -1, nil, &fakeMetrics{})
	if diff := cmp.Diff([]string{"get deployments/scale", "update horizontalpodautoscalers/status"}, e.sync(t)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`Warning FailedGetScale deployments.apps "web" not found`}, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	got := conditions(&autoscalingv2.HorizontalPodAutoscaler{Status: e.status(t)})["AbleToScale"]
	want := condition{"False", "FailedGetScale", `the HPA controller was unable to get the target's current scale: deployments.apps "web" not found`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AbleToScale (-want +got):\n%s", diff)
	}
	if e.metrics.calls != 0 {
		t.Errorf("metrics read %d times for a missing target", e.metrics.calls)
	}
}

func TestSyncUnknownKind(t *testing.T) {
	hpa := makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "web"}
	})
	e := newEnv(t, hpa, 1, nil, &fakeMetrics{})
	if diff := cmp.Diff([]string{"update horizontalpodautoscalers/status"}, e.sync(t)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`Warning FailedGetScale no matches for kind "Widget" in group "example.com"`}, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSyncScalesDownAfterLoad(t *testing.T) {
	pods := []*v1.Pod{makePod("web-0", nil), makePod("web-1", nil), makePod("web-2", nil)}
	hpa := makeHPA(withBehavior(nil, nil))
	e := newEnv(t, hpa, 3, pods, &fakeMetrics{items: cpuMetrics(1, 2, 0)})
	want := []string{"get deployments/scale", "update deployments/scale", "update horizontalpodautoscalers/status"}
	if diff := cmp.Diff(want, e.sync(t)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if e.replicas != 1 {
		t.Errorf("scale = %d, want 1", e.replicas)
	}
	if diff := cmp.Diff([]string{"Normal SuccessfulRescale New size: 1; reason: All metrics below target"}, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSyncAmbiguousSelector(t *testing.T) {
	e := newEnv(t, makeHPA(nil), 1, []*v1.Pod{makePod("web-0", nil)}, &fakeMetrics{items: cpuMetrics(150)})
	e.c.selectors["default/other"] = labels.SelectorFromSet(labels.Set{"app": "web"})
	if diff := cmp.Diff([]string{"get deployments/scale", "update horizontalpodautoscalers/status"}, e.sync(t)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	msg := "pods by selector app=web are controlled by more than one HPA (e.g. [default/other default/web])"
	want := []string{"Warning AmbiguousSelector " + msg, "Warning FailedComputeMetricsReplicas " + msg}
	if diff := cmp.Diff(want, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Deleting the other HPA ends the ambiguity.
	e.c.hpaChanged(makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Name = "other" }), nil)
	e.sync(t)
	if e.replicas != 3 {
		t.Errorf("scale = %d, want 3", e.replicas)
	}
}

func TestHPAChangesQueue(t *testing.T) {
	e := newEnv(t, makeHPA(nil), 1, nil, &fakeMetrics{})
	old := makeHPA(nil)
	statusOnly := old.DeepCopy()
	statusOnly.Status.CurrentReplicas = 2
	e.c.hpaChanged(old, statusOnly)
	if n := e.c.queue.Len(); n != 0 {
		t.Errorf("a status write queued the HPA at once (%d)", n)
	}
	spec := old.DeepCopy()
	spec.Generation = 2
	e.c.hpaChanged(old, spec)
	if n := e.c.queue.Len(); n != 1 {
		t.Errorf("a spec change did not queue the HPA at once (%d)", n)
	}
}

// TestSyncScalesCustomResource: a target of a kind that is not built in (a custom
// resource with a scale subresource) is read and scaled through the scale client, at
// the resource the RESTMapper gives, as kube-controller-manager scales any target.
func TestSyncScalesCustomResource(t *testing.T) {
	hpa := makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "web"}
	})
	e := newEnv(t, hpa, 1, []*v1.Pod{makePod("web-0", nil)}, &fakeMetrics{items: cpuMetrics(150)})
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	mapper.Add(gv.WithKind("Widget"), meta.RESTScopeNamespace)
	scales := &fakescale.FakeScaleClient{}
	widgets := int32(1)
	scales.AddReactor("get", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := makeScale(widgets)
		s.Name = a.(clienttesting.GetAction).GetName()
		return true, s, nil
	})
	scales.AddReactor("update", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := a.(clienttesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		widgets = s.Spec.Replicas
		return true, s, nil
	})
	e.c.scales, e.c.mapper = scales, mapper
	if diff := cmp.Diff([]string{"update horizontalpodautoscalers/status"}, e.sync(t)); diff != "" {
		t.Errorf("clientset actions (-want +got):\n%s", diff)
	}
	var got []string
	for _, a := range scales.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Group+"/"+a.GetResource().Resource+" "+a.GetNamespace())
	}
	if diff := cmp.Diff([]string{"get example.com/widgets default", "update example.com/widgets default"}, got); diff != "" {
		t.Errorf("scale client actions (-want +got):\n%s", diff)
	}
	if widgets != 3 {
		t.Errorf("widget scale = %d, want 3", widgets)
	}
}

// fakeExternal answers every External metric with values (milli-units), or err.
type fakeExternal struct {
	values []int64
	err    error
	asked  []string
}

func (f *fakeExternal) ExternalMetric(_ context.Context, namespace, name string, selector labels.Selector) ([]int64, error) {
	f.asked = append(f.asked, namespace+"/"+name+"{"+selector.String()+"}")
	return f.values, f.err
}

// externalHPA targets the queue metric of series queue=jobs with target.
func externalHPA(target autoscalingv2.MetricTarget) *autoscalingv2.HorizontalPodAutoscaler {
	return makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
			Target: target}}}
	})
}

// TestSyncExternalMetric: an External metric is read from the external metrics API and
// scales as kube-controller-manager's replica calculator does: against a total (Value),
// the ratio of the series' sum to it times the ready pods; against a per-pod
// AverageValue, the sum over it. Without an external metrics API the metric fails with
// FailedGetExternalMetric.
func TestSyncExternalMetric(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name         string
		target       autoscalingv2.MetricTarget
		current      int32
		values       []int64
		wantReplicas int32
		wantCurrent  string
	}{
		// 6 against a total of 4 with 2 ready pods: ceil(1.5 * 2) = 3.
		{"value", autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("4")}, 2, []int64{2500, 3500}, 3, "Value 6"},
		// 12 against 3 per pod: 4 pods.
		{"average value", autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("3")}, 2, []int64{5000, 7000}, 4, "AverageValue 6"},
		// 4.2 against a total of 4 is within the tolerance: no change.
		{"within tolerance", autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("4")}, 2, []int64{4200}, 2, "Value 4200m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ext := &fakeExternal{values: tc.values}
			e := newEnv(t, externalHPA(tc.target), tc.current, makePods(int(tc.current)), &fakeMetrics{})
			e.c.external = ext
			e.sync(t)
			if e.replicas != tc.wantReplicas {
				t.Errorf("scale = %d, want %d", e.replicas, tc.wantReplicas)
			}
			if diff := cmp.Diff([]string{"default/queue{queue=jobs}"}, ext.asked); diff != "" {
				t.Errorf("external metrics asked (-want +got):\n%s", diff)
			}
			st := e.status(t)
			if len(st.CurrentMetrics) != 1 || st.CurrentMetrics[0].External == nil {
				t.Fatalf("current metrics %+v", st.CurrentMetrics)
			}
			cur := st.CurrentMetrics[0].External.Current
			got := ""
			if cur.Value != nil {
				got = "Value " + cur.Value.String()
			}
			if cur.AverageValue != nil {
				got = "AverageValue " + cur.AverageValue.String()
			}
			if got != tc.wantCurrent || st.CurrentMetrics[0].External.Metric.Name != "queue" {
				t.Errorf("external metric status %q (%+v), want %q", got, st.CurrentMetrics[0].External, tc.wantCurrent)
			}
		})
	}

	t.Run("no external metrics API", func(t *testing.T) {
		e := newEnv(t, externalHPA(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("4")}), 2, makePods(2), &fakeMetrics{})
		e.sync(t)
		want := `Warning FailedGetExternalMetric unable to get external metric default/queue/&LabelSelector{MatchLabels:map[string]string{queue: jobs,},MatchExpressions:[]LabelSelectorRequirement{},}: unable to fetch metrics from external metrics API: no external metrics API (external.metrics.k8s.io) registered`
		evs := e.events()
		if len(evs) == 0 || evs[0] != want {
			t.Errorf("events %q, want first %q", evs, want)
		}
		if e.replicas != 2 {
			t.Errorf("scale = %d, want 2 (unchanged)", e.replicas)
		}
	})
}
