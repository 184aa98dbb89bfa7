package hpa

import (
	"errors"
	"fmt"
	"math"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// event is an event the sync records on the HPA.
type event struct{ kind, reason, message string }

// settings are the controller-wide knobs a computation uses.
type settings struct {
	tolerance              float64
	downscaleStabilization time.Duration
	readiness              readiness
}

// snapshot is what one sync of an HPA looks at, read before computing.
type snapshot struct {
	// hpa is a copy the computation writes its status and conditions into.
	hpa   *autoscalingv2.HorizontalPodAutoscaler
	scale *autoscalingv1.Scale
	// selectorErr is set when the scale's selector cannot be used: it is the event and
	// condition to report (reason, message) and the error.
	selectorErr *selectorProblem
	// pods are the pods the scale's selector picks.
	pods []*v1.Pod
	// podMetrics and metricsErr are the resource metrics API's answer for those pods,
	// fetched only when a resource metric needs them.
	podMetrics []metricsv1beta1.PodMetrics
	metricsErr error
	// external are the external metrics API's answers, by metric index.
	external map[int]externalValues
	now      time.Time
}

// selectorProblem is why a scale's selector cannot be used, as an event (reason,
// message) and a ScalingActive=False condition (reason, message).
type selectorProblem struct {
	eventReason, eventMessage         string
	conditionReason, conditionMessage string
}

// decision is the outcome of the pure part of a sync.
type decision struct {
	current, desired int32
	rescale          bool
	// reason is the rescale reason, as events say it ("cpu resource utilization
	// (percentage of request) above target").
	reason   string
	statuses []autoscalingv2.MetricStatus
	events   []event
	// failed is set when no replica count could be computed: only the status is written.
	failed error
	// partial is a metric error that did not prevent scaling on the other metrics.
	partial error
}

// decide computes the desired size of hpa's target from a snapshot, updating conditions
// on s.hpa and recommendations in h. It does no I/O.
func decide(s snapshot, h *history, cfg settings) decision {
	hpa := s.hpa
	now := s.now
	setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale", now)
	d := decision{current: s.scale.Spec.Replicas, rescale: true}
	h.recordInitial(d.current, now)
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	objectOrExternal := hasObjectOrExternalMetrics(hpa)
	scaledToZero := conditionTrue(hpa, autoscalingv2.ScaledToZero)

	needMetrics := true
	switch {
	case d.current == 0:
		if !(minReplicas != 0 && scaledToZero) && !(scaledToZero && objectOrExternal) {
			// Someone scaled the target to zero by hand: leave it alone.
			needMetrics, d.rescale = false, false
			setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero", now)
		}
	case d.current > hpa.Spec.MaxReplicas:
		d.reason, d.desired, needMetrics = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas, false
	case d.current < minReplicas:
		d.reason, d.desired, needMetrics = "Current number of replicas below Spec.MinReplicas", minReplicas, false
	}
	if !needMetrics {
		return d
	}

	proposal, metricName, statuses, err := replicasForMetrics(s, &d, cfg)
	d.statuses = statuses
	if proposal < 0 {
		d.failed = err
		d.events = append(d.events, event{v1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error()})
		return d
	}
	d.partial = err
	rescaleMetric := ""
	if proposal > d.desired {
		d.desired, rescaleMetric = proposal, metricName
	}
	if d.desired > d.current {
		d.reason = rescaleMetric + " above target"
	}
	if d.desired < d.current {
		d.reason = "All metrics below target"
	}
	if hpa.Spec.Behavior == nil {
		stabilized := h.stabilize(d.desired, cfg.downscaleStabilization, now)
		if stabilized != d.desired {
			setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ScaleDownStabilized", msgScaleDownStabilized, now)
		} else {
			setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ReadyForNewScale", msgReadyForNewScale, now)
		}
		l := clampWithoutBehavior(d.current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
		setLimited(hpa, l, stabilized, now)
		d.desired = l.replicas
	} else {
		b := hpa.Spec.Behavior.DeepCopy()
		if b.ScaleDown != nil && b.ScaleDown.StabilizationWindowSeconds == nil {
			b.ScaleDown.StabilizationWindowSeconds = ptrTo(int32(cfg.downscaleStabilization.Seconds()))
		}
		b.ScaleUp, b.ScaleDown = orDefault(b.ScaleUp, true), orDefault(b.ScaleDown, false)
		stabilized, reason, message := h.stabilizeWithBehavior(d.current, d.desired, b.ScaleUp, b.ScaleDown, now)
		if stabilized != d.desired {
			setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, reason, message, now)
		} else {
			setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ReadyForNewScale", msgReadyForNewScale, now)
		}
		l := h.clampWithBehavior(d.current, stabilized, minReplicas, hpa.Spec.MaxReplicas, b, now)
		setLimited(hpa, l, stabilized, now)
		d.desired = l.replicas
	}
	if d.current == 0 && minReplicas != 0 && scaledToZero && d.desired < minReplicas {
		d.desired = minReplicas
		if d.reason == "" {
			d.reason = "Current number of replicas below Spec.MinReplicas"
		}
	}
	d.rescale = d.desired != d.current
	return d
}

func setLimited(hpa *autoscalingv2.HorizontalPodAutoscaler, l limit, stabilized int32, now time.Time) {
	status := v1.ConditionTrue
	if l.replicas == stabilized {
		status = v1.ConditionFalse
	}
	setCondition(hpa, autoscalingv2.ScalingLimited, status, l.reason, l.message, now)
}

// orDefault stands in for a rule set the API server would have defaulted (an HPA that
// reached us without it, e.g. written straight to storage).
func orDefault(r *autoscalingv2.HPAScalingRules, up bool) *autoscalingv2.HPAScalingRules {
	if r != nil && r.SelectPolicy != nil && r.Policies != nil {
		return r
	}
	d := &autoscalingv2.HPAScalingRules{SelectPolicy: ptrTo(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
	if up {
		d.StabilizationWindowSeconds = ptrTo[int32](0)
		d.Policies = append([]autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}}, d.Policies...)
	}
	if r == nil {
		return d
	}
	out := r.DeepCopy()
	if out.SelectPolicy == nil {
		out.SelectPolicy = d.SelectPolicy
	}
	if out.Policies == nil {
		out.Policies = d.Policies
	}
	return out
}

// replicasForMetrics proposes the largest replica count any metric asks for. It returns
// -1 with the first metric's error when every metric failed, or when some failed and the
// others would scale down (scaling down on partial information is not safe); otherwise
// the error of failed metrics, if any, comes back beside a usable proposal.
func replicasForMetrics(s snapshot, d *decision, cfg settings) (int32, string, []autoscalingv2.MetricStatus, error) {
	hpa := s.hpa
	if p := s.selectorErr; p != nil {
		d.events = append(d.events, event{v1.EventTypeWarning, p.eventReason, p.eventMessage})
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, p.conditionReason, p.conditionMessage, s.now)
		return -1, "", nil, errors.New(p.eventMessage)
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var (
		replicas     int32
		metric       string
		invalid      int
		firstErr     error
		firstReason  string
		firstMessage string
	)
	for i := range specs {
		proposal, name, reason, err := replicasForMetric(s, i, specs[i], &statuses[i], cfg)
		if err != nil {
			d.events = append(d.events, event{v1.EventTypeWarning, reason, errors.Unwrap(err).Error()})
			if invalid == 0 {
				firstErr, firstReason = err, reason
				firstMessage = "the HPA was unable to compute the replica count: " + errors.Unwrap(err).Error()
			}
			invalid++
			continue
		}
		if replicas == 0 || proposal > replicas {
			replicas, metric = proposal, name
		}
	}
	var err error
	if firstErr != nil {
		err = fmt.Errorf("invalid metrics (%d invalid out of %d), first error is: %w", invalid, len(specs), firstErr)
	}
	if invalid > 0 && (invalid >= len(specs) || replicas < s.scale.Spec.Replicas) {
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, firstReason, firstMessage, s.now)
		return -1, "", statuses, err
	}
	setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionTrue, "ValidMetricFound",
		"the HPA was able to successfully calculate a replica count from "+metric, s.now)
	return replicas, metric, statuses, err
}

// metricError pairs the message events and conditions show (the wrapped error) with the
// prefix the controller's own error adds.
type metricError struct {
	prefix string
	err    error
}

func (e *metricError) Error() string { return e.prefix + e.err.Error() }
func (e *metricError) Unwrap() error { return e.err }

// Errors for metric sources tranche has no API for.
var (
	errNoCustomMetrics   = errors.New("unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered")
	errNoExternalMetrics = errors.New("unable to fetch metrics from external metrics API: no external metrics API (external.metrics.k8s.io) registered")
)

// replicasForMetric computes one metric's proposal and fills its status. On failure it
// returns the condition reason and a *metricError.
func replicasForMetric(s snapshot, index int, spec autoscalingv2.MetricSpec, status *autoscalingv2.MetricStatus, cfg settings) (int32, string, string, error) {
	fail := func(reason, prefix string, err error) (int32, string, string, error) {
		return 0, "", reason, &metricError{prefix: prefix, err: err}
	}
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			break
		}
		value, name, err := resourceProposal(s, spec.Resource.Target, spec.Resource.Name, "", cfg)
		if err != nil {
			return fail("FailedGetResourceMetric", fmt.Sprintf("failed to get %s resource metric value: ", spec.Resource.Name), err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: value.status}}
		return value.replicas, name, "", nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			break
		}
		cr := spec.ContainerResource
		value, name, err := resourceProposal(s, cr.Target, cr.Name, cr.Container, cfg)
		if err != nil {
			return fail("FailedGetContainerResourceMetric", fmt.Sprintf("failed to get %s container metric value: ", cr.Container), err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: cr.Name, Container: cr.Container, Current: value.status}}
		return value.replicas, name, "", nil
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			break
		}
		return fail("FailedGetPodsMetric", "failed to get pods metric value: ", fmt.Errorf("unable to get metric %s: %w", spec.Pods.Metric.Name, errNoCustomMetrics))
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil {
			break
		}
		o := spec.Object
		return fail("FailedGetObjectMetric", "failed to get object metric value: ",
			fmt.Errorf("unable to get metric %s on %s %s/%s: %w", o.Metric.Name, o.DescribedObject.Kind, s.hpa.Namespace, o.DescribedObject.Name, errNoCustomMetrics))
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil {
			break
		}
		e := spec.External
		prefix := fmt.Sprintf("failed to get external metric %s: ", e.Metric.Name)
		if e.Target.AverageValue != nil {
			prefix = fmt.Sprintf("failed to get %s external metric: ", e.Metric.Name)
		}
		got := s.external[index]
		if got.err != nil {
			return fail("FailedGetExternalMetric", prefix, fmt.Errorf("unable to get external metric %s/%s/%+v: %w", s.hpa.Namespace, e.Metric.Name, e.Metric.Selector, got.err))
		}
		p, err := externalProposal(s, e.Target, got.values, tolerancesFor(s.hpa, cfg.tolerance))
		if err != nil {
			return fail("FailedGetExternalMetric", prefix, err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, External: &autoscalingv2.ExternalMetricStatus{
			Metric: autoscalingv2.MetricIdentifier{Name: e.Metric.Name, Selector: e.Metric.Selector}, Current: p.status}}
		return p.replicas, fmt.Sprintf("external metric %s(%+v)", e.Metric.Name, e.Metric.Selector), "", nil
	}
	return fail("InvalidMetricSourceType", "", fmt.Errorf("unknown metric source type %q", string(spec.Type)))
}

// externalProposal is an External metric's proposal from the series' values: against
// a total (Value) target, the ratio of their sum to it times the ready pods; against a
// per-pod (AverageValue) target, their sum over it; the current count within the
// tolerance, as kube-controller-manager's replica calculator.
func externalProposal(s snapshot, target autoscalingv2.MetricTarget, values []int64, tol tolerances) (proposal, error) {
	var usage int64
	for _, v := range values {
		if v > 0 && usage > math.MaxInt64-v {
			usage = math.MaxInt64
			break
		}
		usage += v
	}
	switch {
	case target.AverageValue != nil:
		replicas := s.scale.Status.Replicas
		ratio := float64(usage) / (float64(target.AverageValue.MilliValue()) * float64(replicas))
		if !tol.within(ratio) {
			replicas = int32(min(math.Ceil(float64(usage)/float64(target.AverageValue.MilliValue())), math.MaxInt32))
		}
		average := int64(math.MaxInt64)
		if float64(usage) < float64(math.MaxInt64) {
			average = int64(math.Ceil(float64(usage) / float64(s.scale.Status.Replicas)))
		}
		return proposal{replicas, autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(average, resource.DecimalSI)}}, nil
	case target.Value != nil:
		current := s.scale.Spec.Replicas
		ratio := float64(usage) / float64(target.Value.MilliValue())
		replicas := current
		switch {
		case current == 0:
			replicas = int32(math.Ceil(ratio))
		case !tol.within(ratio):
			if len(s.pods) == 0 {
				return proposal{}, errors.New("unable to calculate ready pods: no pods returned by selector while calculating replica count")
			}
			ready := 0
			for _, p := range s.pods {
				if p.Status.Phase == v1.PodRunning && podutil.IsPodReady(p) {
					ready++
				}
			}
			replicas = int32(min(math.Ceil(ratio*float64(ready)), math.MaxInt32))
		}
		return proposal{replicas, autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(usage, resource.DecimalSI)}}, nil
	}
	return proposal{}, errors.New("invalid external metric source: neither a value target nor an average value target was set")
}

type proposal struct {
	replicas int32
	status   autoscalingv2.MetricValueStatus
}

// resourceProposal handles Resource and ContainerResource metrics: a raw average target
// or a utilization target, over the pods' PodMetrics.
func resourceProposal(s snapshot, target autoscalingv2.MetricTarget, res v1.ResourceName, container string, cfg settings) (proposal, string, error) {
	in := replicaInput{current: s.scale.Spec.Replicas, pods: s.pods, resource: res, container: container,
		tolerances: tolerancesFor(s.hpa, cfg.tolerance), readiness: cfg.readiness, now: s.now}
	kind := "utilization"
	if target.AverageValue != nil {
		kind = "usage"
	} else if target.AverageUtilization == nil {
		return proposal{}, "", errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	fetch := func() error {
		if s.metricsErr != nil {
			return fmt.Errorf("unable to get metrics for resource %s: %w", res, s.metricsErr)
		}
		if len(s.pods) == 0 {
			return errors.New("no pods returned by selector while calculating replica count")
		}
		in.metrics = usageOf(s.podMetrics, res, container)
		return nil
	}
	if err := fetch(); err != nil {
		return proposal{}, "", fmt.Errorf("failed to get %s %s: %w", res, kind, err)
	}
	if target.AverageValue != nil {
		replicas, average, err := averageValueReplicas(in, target.AverageValue.MilliValue())
		if err != nil {
			return proposal{}, "", fmt.Errorf("failed to get %s usage: %w", res, err)
		}
		q := quantityFor(res, average)
		return proposal{replicas, autoscalingv2.MetricValueStatus{AverageValue: &q}}, string(res) + " resource", nil
	}
	replicas, utilization, raw, err := utilizationReplicas(in, *target.AverageUtilization)
	if err != nil {
		return proposal{}, "", fmt.Errorf("failed to get %s utilization: %w", res, err)
	}
	q := quantityFor(res, raw)
	name := string(res) + " resource utilization (percentage of request)"
	if container != "" {
		name = string(res) + " container resource utilization (percentage of request)"
	}
	return proposal{replicas, autoscalingv2.MetricValueStatus{AverageUtilization: &utilization, AverageValue: &q}}, name, nil
}

// quantityFor formats a usage as metrics-server does: memory in binary units, anything
// else in decimal milli-units.
func quantityFor(res v1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if res == v1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

// tolerancesFor is the controller's tolerance, overridden per direction by the HPA's
// behavior.
func tolerancesFor(hpa *autoscalingv2.HorizontalPodAutoscaler, tolerance float64) tolerances {
	t := tolerances{tolerance, tolerance}
	if b := hpa.Spec.Behavior; b != nil {
		if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
			t.down = b.ScaleDown.Tolerance.AsApproximateFloat64()
		}
		if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
			t.up = b.ScaleUp.Tolerance.AsApproximateFloat64()
		}
	}
	return t
}

func hasObjectOrExternalMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

// needsPodMetrics reports whether any metric reads the resource metrics API.
func needsPodMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType || m.Type == autoscalingv2.ContainerResourceMetricSourceType {
			return true
		}
	}
	return false
}

func conditionTrue(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range hpa.Status.Conditions {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// setCondition sets a condition's status, reason and message, moving its transition time
// only when the status changes.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType, status v1.ConditionStatus, reason, message string, now time.Time) {
	conds := hpa.Status.Conditions
	i := 0
	for i < len(conds) && conds[i].Type != t {
		i++
	}
	if i == len(conds) {
		conds = append(conds, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
	}
	c := &conds[i]
	if c.Status != status {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	c.Status, c.Reason, c.Message = status, reason, message
	hpa.Status.Conditions = conds
}

// setStatus rewrites the status from a sync's outcome, keeping conditions and the last
// scale time unless it rescaled.
func setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, statuses []autoscalingv2.MetricStatus, rescaled bool, now time.Time) {
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas:    current,
		DesiredReplicas:    desired,
		LastScaleTime:      hpa.Status.LastScaleTime,
		CurrentMetrics:     statuses,
		Conditions:         hpa.Status.Conditions,
		ObservedGeneration: ptrTo(hpa.Generation),
	}
	if rescaled {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

func ptrTo[T any](v T) *T { return &v }
