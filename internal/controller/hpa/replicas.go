package hpa

import (
	"errors"
	"fmt"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// podMetric is one pod's usage of a resource, in milli-units (millicores, millibytes).
type podMetric struct {
	value     int64
	timestamp time.Time
	window    time.Duration
}

// podMetrics maps pod names to their usage.
type podMetrics map[string]podMetric

// tolerances are how far the usage ratio may stray from 1 before the HPA acts.
type tolerances struct{ down, up float64 }

func (t tolerances) within(ratio float64) bool {
	return 1-t.down <= ratio && ratio <= 1+t.up
}

// readiness holds the settings that decide whether a pod's CPU sample can be trusted
// (kube-controller-manager's --horizontal-pod-autoscaler-cpu-initialization-period and
// --horizontal-pod-autoscaler-initial-readiness-delay).
type readiness struct {
	cpuInitializationPeriod time.Duration
	initialReadinessDelay   time.Duration
}

// usageOf reads one resource from PodMetrics: the sum over the pod's containers, or the
// named container's alone. A pod missing the resource in any container (or, with a
// container named, missing that container) is left out, as metrics-server's consumers do.
func usageOf(items []metricsv1beta1.PodMetrics, resource v1.ResourceName, container string) podMetrics {
	out := make(podMetrics, len(items))
	for _, m := range items {
		var sum int64
		found := container == "" && len(m.Containers) > 0
		for _, c := range m.Containers {
			if container != "" && c.Name != container {
				continue
			}
			q, ok := c.Usage[resource]
			if !ok {
				found = false
				break
			}
			sum += q.MilliValue()
			found = true
		}
		if found {
			out[m.Name] = podMetric{value: sum, timestamp: m.Timestamp.Time, window: m.Window.Duration}
		}
	}
	return out
}

// podGroups sorts the selected pods for a replica computation.
type podGroups struct {
	// ready is the number of pods whose sample counts as it is.
	ready int
	// unready pods (pending, or CPU samples taken while starting) count as using nothing on
	// a scale-up and are left out otherwise; missing pods have no sample; ignored pods
	// (failed or being deleted) do not count at all.
	unready, missing, ignored sets.Set[string]
}

// groupPods classifies pods as Kubernetes' replica calculator does. For CPU, a pod is
// unready without a Ready condition or start time; within the initialization period after
// start, when it is not ready or its sample was taken (partly) before it became ready;
// after it, when it is not ready and never has been (its readiness last changed within the
// initial readiness delay of its start).
func groupPods(pods []*v1.Pod, metrics podMetrics, resource v1.ResourceName, r readiness, now time.Time) podGroups {
	g := podGroups{unready: sets.New[string](), missing: sets.New[string](), ignored: sets.New[string]()}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodFailed {
			g.ignored.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == v1.PodPending {
			g.unready.Insert(pod.Name)
			continue
		}
		metric, ok := metrics[pod.Name]
		if !ok {
			g.missing.Insert(pod.Name)
			continue
		}
		if resource == v1.ResourceCPU && cpuSampleUnready(pod, metric, r, now) {
			g.unready.Insert(pod.Name)
			continue
		}
		g.ready++
	}
	return g
}

func cpuSampleUnready(pod *v1.Pod, metric podMetric, r readiness, now time.Time) bool {
	var cond *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			cond = &pod.Status.Conditions[i]
		}
	}
	if cond == nil || pod.Status.StartTime == nil {
		return true
	}
	start := pod.Status.StartTime.Time
	if start.Add(r.cpuInitializationPeriod).After(now) {
		return cond.Status == v1.ConditionFalse || metric.timestamp.Before(cond.LastTransitionTime.Add(metric.window))
	}
	return cond.Status == v1.ConditionFalse && start.Add(r.initialReadinessDelay).After(cond.LastTransitionTime.Time)
}

// podRequests returns each pod's request of resource in milli-units: the named
// container's, else the pod-level request when the pod sets one, else the sum over its
// containers and sidecar (restartable init) containers. A container without a request
// makes utilization meaningless, so it is an error naming the pod.
func podRequests(pods []*v1.Pod, container string, resource v1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		if container == "" && pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests) > 0 {
			if q, ok := pod.Spec.Resources.Requests[resource]; ok {
				out[pod.Name] = q.MilliValue()
				continue
			}
		}
		containers := append([]v1.Container{}, pod.Spec.Containers...)
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
				containers = append(containers, c)
			}
		}
		var sum int64
		found := false
		for _, c := range containers {
			if container != "" && c.Name != container {
				continue
			}
			q, ok := c.Resources.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, c.Name, pod.Name)
			}
			sum += q.MilliValue()
			found = true
		}
		if container != "" && !found {
			return nil, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
		}
		out[pod.Name] = sum
	}
	return out, nil
}

// utilizationRatio sums usage and requests over the pods that have both and returns the
// ratio of utilization to target, the utilization in percent and the average raw usage.
func utilizationRatio(metrics podMetrics, requests map[string]int64, target int32) (ratio float64, utilization int32, rawAverage int64, err error) {
	var usage, requested int64
	n := 0
	for name, m := range metrics {
		r, ok := requests[name]
		if !ok {
			continue
		}
		usage += m.value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization = int32(usage * 100 / requested)
	return float64(utilization) / float64(target), utilization, usage / int64(n), nil
}

// averageRatio is the ratio of the pods' average usage to a per-pod target.
func averageRatio(metrics podMetrics, target int64) (ratio float64, average int64) {
	var total int64
	for _, m := range metrics {
		total += m.value
	}
	average = total / int64(len(metrics))
	return float64(average) / float64(target), average
}

// replicaInput is what a resource metric's replica computation looks at.
type replicaInput struct {
	current    int32
	pods       []*v1.Pod
	metrics    podMetrics
	resource   v1.ResourceName
	container  string
	tolerances tolerances
	readiness  readiness
	now        time.Time
}

// utilizationReplicas proposes a replica count for an average utilization target (percent
// of requests), and reports the current utilization and average raw usage.
//
// As Kubernetes does: pods without a sample count as using their whole request (or the
// target, when above 100%) on a scale-down and nothing on a scale-up; unready pods count
// as using nothing on a scale-up and are left out otherwise; and when these guesses would
// reverse the direction or land within the tolerance, the count stays as it is.
func utilizationReplicas(in replicaInput, target int32) (replicas, utilization int32, rawAverage int64, err error) {
	metrics := copyMetrics(in.metrics)
	g := groupPods(in.pods, metrics, in.resource, in.readiness, in.now)
	dropPods(metrics, g.ignored)
	dropPods(metrics, g.unready)
	if len(metrics) == 0 {
		return 0, 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := podRequests(in.pods, in.container, in.resource)
	if err != nil {
		return 0, 0, 0, err
	}
	ratio, utilization, rawAverage, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, err
	}
	missingValue := func(name string) int64 { return requests[name] * int64(max(100, target)) / 100 }
	newRatio := func(m podMetrics) (float64, error) {
		r, _, _, err := utilizationRatio(m, requests, target)
		return r, err
	}
	replicas, err = adjustForMissing(in, g, metrics, ratio, missingValue, newRatio)
	return replicas, utilization, rawAverage, err
}

// averageValueReplicas proposes a replica count for an average raw usage target (in
// milli-units per pod), with the same handling of missing and unready pods, missing pods
// counting as exactly on target on a scale-down.
func averageValueReplicas(in replicaInput, target int64) (replicas int32, average int64, err error) {
	metrics := copyMetrics(in.metrics)
	g := groupPods(in.pods, metrics, in.resource, in.readiness, in.now)
	dropPods(metrics, g.ignored)
	dropPods(metrics, g.unready)
	if len(metrics) == 0 {
		return 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, average := averageRatio(metrics, target)
	newRatio := func(m podMetrics) (float64, error) {
		r, _ := averageRatio(m, target)
		return r, nil
	}
	replicas, err = adjustForMissing(in, g, metrics, ratio, func(string) int64 { return target }, newRatio)
	return replicas, average, err
}

// adjustForMissing finishes a replica computation from the ready pods' ratio.
func adjustForMissing(in replicaInput, g podGroups, metrics podMetrics, ratio float64, missingValue func(pod string) int64,
	recompute func(podMetrics) (float64, error)) (int32, error) {
	scaleUpWithUnready := g.unready.Len() > 0 && ratio > 1
	if !scaleUpWithUnready && g.missing.Len() == 0 {
		if in.tolerances.within(ratio) {
			return in.current, nil
		}
		return int32(math.Ceil(ratio * float64(g.ready))), nil
	}
	if g.missing.Len() > 0 {
		for name := range g.missing {
			switch {
			case ratio < 1:
				metrics[name] = podMetric{value: missingValue(name)}
			case ratio > 1:
				metrics[name] = podMetric{}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range g.unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, err := recompute(metrics)
	if err != nil {
		return 0, err
	}
	if in.tolerances.within(newRatio) || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return in.current, nil
	}
	replicas := int32(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1 && replicas > in.current) || (newRatio > 1 && replicas < in.current) {
		return in.current, nil
	}
	return replicas, nil
}

func copyMetrics(m podMetrics) podMetrics {
	out := make(podMetrics, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func dropPods(m podMetrics, names sets.Set[string]) {
	for name := range names {
		delete(m, name)
	}
}
