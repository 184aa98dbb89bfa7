package autoscaling

import (
	"fmt"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/registry"
)

var (
	specDoc   = autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	statusDoc = autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()
)

// Columns are the HPA table's columns, named and described as Kubernetes' printer does.
func Columns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		registry.NameColumn,
		{Name: "Reference", Type: "string", Description: specDoc["scaleTargetRef"]},
		{Name: "Targets", Type: "string", Description: specDoc["metrics"]},
		{Name: "MinPods", Type: "string", Description: specDoc["minReplicas"]},
		{Name: "MaxPods", Type: "string", Description: specDoc["maxReplicas"]},
		{Name: "Replicas", Type: "string", Description: statusDoc["currentReplicas"]},
		registry.AgeColumn,
	}
}

// Row is an HPA's table row: NAME, REFERENCE (Kind/name), TARGETS ("cpu: 45%/50%"),
// MINPODS ("<unset>" when nil), MAXPODS, REPLICAS and AGE.
func Row(h *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []interface{} {
	minPods := "<unset>"
	if h.Spec.MinReplicas != nil {
		minPods = fmt.Sprint(*h.Spec.MinReplicas)
	}
	return []interface{}{
		h.Name,
		h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name,
		FormatTargets(h.Spec.Metrics, h.Status.CurrentMetrics),
		minPods,
		int64(h.Spec.MaxReplicas),
		int64(h.Status.CurrentReplicas),
		registry.HumanAge(h.CreationTimestamp, now),
	}
}

// maxShownTargets is how many metrics the TARGETS cell lists before "+ N more...".
const maxShownTargets = 2

// FormatTargets renders "current/target" per metric as kubectl does. As in Kubernetes'
// printer, the i-th status is read as the i-th metric's, and "<unknown>" stands for a
// current value the controller has not reported.
func FormatTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	status := func(i int) *autoscalingv2.MetricStatus {
		if i < len(statuses) {
			return &statuses[i]
		}
		return nil
	}
	var cells []string
	for i, spec := range specs {
		cells = append(cells, formatTarget(spec, status(i)))
	}
	if len(cells) > maxShownTargets {
		return fmt.Sprintf("%s + %d more...", strings.Join(cells[:maxShownTargets], ", "), len(cells)-maxShownTargets)
	}
	return strings.Join(cells, ", ")
}

const unknown = "<unknown>"

func formatTarget(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	switch spec.Type {
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil {
			break
		}
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.External != nil {
			cur = &st.External.Current
		}
		return valueTarget(spec.External.Target, cur)
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil {
			break
		}
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Object != nil {
			cur = &st.Object.Current
		}
		return valueTarget(spec.Object.Target, cur)
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			break
		}
		// A nil quantity prints "<nil>", as in Kubernetes' printer.
		current := unknown
		if st != nil && st.Pods != nil {
			current = st.Pods.Current.AverageValue.String()
		}
		return current + "/" + spec.Pods.Target.AverageValue.String()
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			break
		}
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return string(spec.Resource.Name) + ": " + resourceTarget(spec.Resource.Target, cur)
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			break
		}
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return string(spec.ContainerResource.Name) + ": " + resourceTarget(spec.ContainerResource.Target, cur)
	}
	return "<unknown type>"
}

// valueTarget renders an Object or External metric: "cur/avg (avg)" for a per-pod average
// target, "cur/value" otherwise.
func valueTarget(t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if t.AverageValue != nil {
		if cur != nil && cur.AverageValue != nil {
			current = cur.AverageValue.String()
		}
		return current + "/" + t.AverageValue.String() + " (avg)"
	}
	if cur != nil {
		current = cur.Value.String()
	}
	return current + "/" + t.Value.String()
}

// resourceTarget renders a (container) resource metric: raw averages, or utilization in
// percent ("<auto>" for a target without one).
func resourceTarget(t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if t.AverageValue != nil {
		if cur != nil {
			current = cur.AverageValue.String()
		}
		return current + "/" + t.AverageValue.String()
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	target := "<auto>"
	if t.AverageUtilization != nil {
		target = fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	return current + "/" + target
}
