package hpa

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	registry "github.com/tranche/tranche/internal/registry/autoscaling"
)

// makeHPA is `kubectl autoscale deployment web --cpu-percent=50 --min=1 --max=5`, defaulted,
// after mutate.
func makeHPA(mutate func(*autoscalingv2.HorizontalPodAutoscaler)) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: 1},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: v1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo[int32](50)}}}},
		},
	}
	if mutate != nil {
		mutate(h)
	}
	registry.DefaultHorizontalPodAutoscaler(h)
	return h
}

// withBehavior gives the HPA a behavior with scale-down stabilization 0 and rules
// (defaulted like the API server does).
func withBehavior(up, down *autoscalingv2.HPAScalingRules) func(*autoscalingv2.HorizontalPodAutoscaler) {
	return func(h *autoscalingv2.HorizontalPodAutoscaler) {
		if down == nil {
			down = &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](0)}
		}
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: up, ScaleDown: down}
	}
}

func makeScale(replicas int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
		Status:     autoscalingv1.ScaleStatus{Replicas: replicas, Selector: "app=web"},
	}
}

// cpuMetrics is PodMetrics for pods web-0.. with the given millicores.
func cpuMetrics(millis ...int64) []metricsv1beta1.PodMetrics {
	var out []metricsv1beta1.PodMetrics
	for i, m := range millis {
		out = append(out, makePodMetrics(fmt.Sprintf("web-%d", i), map[string]v1.ResourceList{
			"web": {v1.ResourceCPU: *resource.NewMilliQuantity(m, resource.DecimalSI)}}))
	}
	return out
}

var testSettings = settings{tolerance: DefaultTolerance, downscaleStabilization: DefaultDownscaleStabilization, readiness: defaultReadiness}

type condition struct{ Status, Reason, Message string }

func conditions(h *autoscalingv2.HorizontalPodAutoscaler) map[string]condition {
	out := map[string]condition{}
	for _, c := range h.Status.Conditions {
		out[string(c.Type)] = condition{string(c.Status), c.Reason, c.Message}
	}
	return out
}

func TestDecide(t *testing.T) {
	ableGot := condition{"True", "SucceededGetScale", "the HPA controller was able to get the target's current scale"}
	ready := condition{"True", "ReadyForNewScale", msgReadyForNewScale}
	active := condition{"True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"}
	within := condition{"False", "DesiredWithinRange", msgWithinRange}
	tests := []struct {
		name    string
		hpa     *autoscalingv2.HorizontalPodAutoscaler
		current int32
		metrics []metricsv1beta1.PodMetrics
		// before runs on the history first (earlier recommendations, scale events).
		before      func(*history)
		metricsErr  error
		wantDesired int32
		wantRescale bool
		wantReason  string
		wantConds   map[string]condition
		wantEvents  []event
		wantFailed  string
	}{
		{
			name: "scale up on cpu", hpa: makeHPA(nil), current: 1, metrics: cpuMetrics(150),
			wantDesired: 3, wantRescale: true, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active, "ScalingLimited": within},
		},
		{
			name: "clamped to maxReplicas", hpa: makeHPA(nil), current: 2, metrics: cpuMetrics(400, 400),
			wantDesired: 4, wantRescale: true, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active,
				"ScalingLimited": {"True", "ScaleUpLimit", msgScaleUpLimit}},
		},
		{
			name: "clamped to maxReplicas past the legacy scale-up limit", hpa: makeHPA(nil), current: 3, metrics: cpuMetrics(400, 400, 400),
			wantDesired: 5, wantRescale: true, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active,
				"ScalingLimited": {"True", "TooManyReplicas", msgTooMany}},
		},
		{
			name: "below minReplicas scales up without metrics", hpa: makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptrTo[int32](2) }),
			current: 1, wantDesired: 2, wantRescale: true, wantReason: "Current number of replicas below Spec.MinReplicas",
			wantConds: map[string]condition{"AbleToScale": ableGot},
		},
		{
			name: "above maxReplicas scales down without metrics", hpa: makeHPA(nil), current: 8,
			wantDesired: 5, wantRescale: true, wantReason: "Current number of replicas above Spec.MaxReplicas",
			wantConds: map[string]condition{"AbleToScale": ableGot},
		},
		{
			name: "a target scaled to zero by hand is left alone", hpa: makeHPA(nil), current: 0,
			wantDesired: 0, wantRescale: false,
			wantConds: map[string]condition{"AbleToScale": ableGot,
				"ScalingActive": {"False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero"}},
		},
		{
			name: "scale down is held by the 5 minute stabilization window", hpa: makeHPA(nil), current: 3, metrics: cpuMetrics(5, 5, 5),
			wantDesired: 3, wantRescale: false, wantReason: "All metrics below target",
			wantConds: map[string]condition{"AbleToScale": {"True", "ScaleDownStabilized", msgScaleDownStabilized}, "ScalingActive": active, "ScalingLimited": within},
		},
		{
			name: "scale down after the window", hpa: makeHPA(nil), current: 3, metrics: cpuMetrics(5, 5, 5),
			before: func(h *history) {
				h.recommendations = []timedRecommendation{{3, now.Add(-6 * time.Minute)}, {2, now.Add(-4 * time.Minute)}}
			},
			wantDesired: 2, wantRescale: true, wantReason: "All metrics below target",
			wantConds: map[string]condition{"AbleToScale": {"True", "ScaleDownStabilized", msgScaleDownStabilized}, "ScalingActive": active, "ScalingLimited": within},
		},
		{
			name: "stabilization window 0 scales down at once, to minReplicas", hpa: makeHPA(withBehavior(nil, nil)), current: 3, metrics: cpuMetrics(5, 5, 5),
			wantDesired: 1, wantRescale: true, wantReason: "All metrics below target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active, "ScalingLimited": within},
		},
		{
			name: "a scale-up stabilization window holds growth", current: 2, metrics: cpuMetrics(100, 100),
			hpa:    makeHPA(withBehavior(&autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](60)}, nil)),
			before: func(h *history) { h.recommendations = []timedRecommendation{{2, now.Add(-30 * time.Second)}} },
			// The lowest recommendation within a minute is the current size.
			wantDesired: 2, wantRescale: false, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds: map[string]condition{"AbleToScale": {"True", "ScaleUpStabilized", msgScaleUpStabilized}, "ScalingActive": active, "ScalingLimited": within},
		},
		{
			name: "a pods policy limits growth per period", current: 2, metrics: cpuMetrics(250, 250),
			hpa: makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
				h.Spec.MaxReplicas = 20
				withBehavior(&autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 1, PeriodSeconds: 60}}}, nil)(h)
			}),
			wantDesired: 3, wantRescale: true, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active, "ScalingLimited": {"True", "ScaleUpLimit", msgScaleUpLimit}},
		},
		{
			name: "growth within the period counts against the policy", current: 3, metrics: cpuMetrics(250, 250, 250),
			hpa: makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
				h.Spec.MaxReplicas = 20
				withBehavior(&autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Pods", Value: 1, PeriodSeconds: 60}}}, nil)(h)
			}),
			before:      func(h *history) { h.scaleUps = []scaleEvent{{change: 1, at: now.Add(-30 * time.Second)}} },
			wantDesired: 3, wantRescale: false, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active, "ScalingLimited": {"True", "ScaleUpLimit", msgScaleUpLimit}},
		},
		{
			name: "a percent policy limits shrinking, Min picks the smaller change", current: 10, metrics: cpuMetrics(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
			hpa: makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
				h.Spec.MaxReplicas = 20
				withBehavior(nil, &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](0), SelectPolicy: ptrTo(autoscalingv2.MinChangePolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Percent", Value: 50, PeriodSeconds: 60}, {Type: "Pods", Value: 2, PeriodSeconds: 60}}})(h)
			}),
			wantDesired: 8, wantRescale: true, wantReason: "All metrics below target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active, "ScalingLimited": {"True", "ScaleDownLimit", msgScaleDownLimit}},
		},
		{
			name: "Disabled scale-down", current: 3, metrics: cpuMetrics(1, 1, 1),
			hpa: makeHPA(withBehavior(nil, &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptrTo[int32](0),
				SelectPolicy: ptrTo(autoscalingv2.DisabledPolicySelect)})),
			wantDesired: 3, wantRescale: false, wantReason: "All metrics below target",
			wantConds: map[string]condition{"AbleToScale": ready, "ScalingActive": active, "ScalingLimited": {"True", "ScaleDownLimit", msgScaleDownLimit}},
		},
		{
			name: "no metrics API", hpa: makeHPA(nil), current: 1,
			metricsErr:  errors.New(`unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)`),
			wantDesired: 0, wantRescale: true,
			wantConds: map[string]condition{"AbleToScale": ableGot, "ScalingActive": {"False", "FailedGetResourceMetric",
				"the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"}},
			wantEvents: []event{
				{"Warning", "FailedGetResourceMetric", "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"},
				{"Warning", "FailedComputeMetricsReplicas", "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"},
			},
			wantFailed: "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)",
		},
		{
			name: "a failing custom metric beside a working one that scales up", current: 1, metrics: cpuMetrics(150),
			hpa: makeHPA(func(h *autoscalingv2.HorizontalPodAutoscaler) {
				h.Spec.Metrics = append(h.Spec.Metrics, autoscalingv2.MetricSpec{Type: "Pods", Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Target: autoscalingv2.MetricTarget{Type: "AverageValue", AverageValue: resource.NewQuantity(10, resource.DecimalSI)}}})
			}),
			wantDesired: 3, wantRescale: true, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds:  map[string]condition{"AbleToScale": ready, "ScalingActive": active, "ScalingLimited": within},
			wantEvents: []event{{"Warning", "FailedGetPodsMetric", "unable to get metric rps: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{}
			if tc.before != nil {
				tc.before(h)
			}
			var pods []*v1.Pod
			for i := range max(tc.current, int32(len(tc.metrics))) {
				pods = append(pods, makePod(fmt.Sprintf("web-%d", i), nil))
			}
			s := snapshot{hpa: tc.hpa.DeepCopy(), scale: makeScale(tc.current), pods: pods, podMetrics: tc.metrics, metricsErr: tc.metricsErr, now: now}
			d := decide(s, h, testSettings)
			if d.desired != tc.wantDesired || d.rescale != tc.wantRescale || d.reason != tc.wantReason {
				t.Errorf("desired, rescale, reason = %d, %v, %q; want %d, %v, %q", d.desired, d.rescale, d.reason, tc.wantDesired, tc.wantRescale, tc.wantReason)
			}
			if diff := cmp.Diff(tc.wantConds, conditions(s.hpa)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, d.events, cmp.AllowUnexported(event{})); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			gotFailed := ""
			if d.failed != nil {
				gotFailed = d.failed.Error()
			}
			if gotFailed != tc.wantFailed {
				t.Errorf("failed = %q, want %q", gotFailed, tc.wantFailed)
			}
		})
	}
}

func TestRecordScaleReusesOutdatedEvents(t *testing.T) {
	b := makeHPA(withBehavior(nil, nil)).Spec.Behavior
	h := &history{}
	h.recordScale(b, 1, 3, now.Add(-time.Minute))
	h.recordScale(b, 3, 4, now)
	if len(h.scaleUps) != 1 || h.scaleUps[0].change != 1 || !h.scaleUps[0].at.Equal(now) {
		t.Errorf("scale-ups = %+v, want the outdated event replaced", h.scaleUps)
	}
	h.recordScale(b, 4, 2, now)
	if len(h.scaleDowns) != 1 || h.scaleDowns[0].change != 2 {
		t.Errorf("scale-downs = %+v", h.scaleDowns)
	}
	h.recordScale(nil, 2, 1, now)
	if len(h.scaleDowns) != 1 {
		t.Errorf("an HPA without behavior keeps no events")
	}
}

func TestStabilizeReplacesExpiredRecommendation(t *testing.T) {
	h := &history{recommendations: []timedRecommendation{{5, now.Add(-10 * time.Minute)}, {4, now.Add(-time.Minute)}}}
	if got := h.stabilize(2, 5*time.Minute, now); got != 4 {
		t.Errorf("stabilized = %d, want 4", got)
	}
	want := []timedRecommendation{{2, now}, {4, now.Add(-time.Minute)}}
	if diff := cmp.Diff(want, h.recommendations, cmp.AllowUnexported(timedRecommendation{})); diff != "" {
		t.Errorf("recommendations (-want +got):\n%s", diff)
	}
}
