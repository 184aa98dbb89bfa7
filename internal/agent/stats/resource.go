package stats

import (
	"io"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// ResourceMetricsContentType is the media type of /metrics/resource: Prometheus text
// format 0.0.4, what kubelet sends and metrics-server parses.
const ResourceMetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// resourceMetric is one family of kubelet's resource metrics: its name, help (with the
// stability level kubelet's metrics framework prefixes), type and label names.
type resourceMetric struct {
	name, help string
	typ        dto.MetricType
	labels     []string
}

// The families kubelet's resource metrics collector exports, in the order the text
// format writes them (by name). Counters and gauges carry the time their value was read,
// which metrics-server needs to compute rates.
var (
	containerCPU = resourceMetric{"container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
		dto.MetricType_COUNTER, []string{"container", "namespace", "pod"}}
	containerMemory = resourceMetric{"container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes",
		dto.MetricType_GAUGE, []string{"container", "namespace", "pod"}}
	containerStart = resourceMetric{"container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds",
		dto.MetricType_GAUGE, []string{"container", "namespace", "pod"}}
	nodeCPU = resourceMetric{"node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
		dto.MetricType_COUNTER, nil}
	nodeMemory = resourceMetric{"node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes",
		dto.MetricType_GAUGE, nil}
	podCPU = resourceMetric{"pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
		dto.MetricType_COUNTER, []string{"namespace", "pod"}}
	podMemory = resourceMetric{"pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes",
		dto.MetricType_GAUGE, []string{"namespace", "pod"}}
	resourceScrapeError = resourceMetric{"resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
		dto.MetricType_GAUGE, nil}
	scrapeError = resourceMetric{"scrape_error", "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise",
		dto.MetricType_GAUGE, nil}
)

// family collects the samples of one resourceMetric.
type family struct {
	m       resourceMetric
	samples []*dto.Metric
}

// add records a sample; at is its timestamp (none when zero); values are the label
// values in the order of m.labels.
func (f *family) add(v float64, at time.Time, values ...string) {
	s := &dto.Metric{}
	for i, name := range f.m.labels {
		s.Label = append(s.Label, &dto.LabelPair{Name: ptr.To(name), Value: ptr.To(values[i])})
	}
	switch f.m.typ {
	case dto.MetricType_COUNTER:
		s.Counter = &dto.Counter{Value: ptr.To(v)}
	default:
		s.Gauge = &dto.Gauge{Value: ptr.To(v)}
	}
	if !at.IsZero() {
		s.TimestampMs = ptr.To(at.UnixMilli())
	}
	f.samples = append(f.samples, s)
}

// proto is the family as the text encoder takes it, its samples ordered by label
// values as a Prometheus registry orders them.
func (f *family) proto() *dto.MetricFamily {
	sort.SliceStable(f.samples, func(i, j int) bool {
		a, b := f.samples[i].Label, f.samples[j].Label
		for k := range a {
			if c := strings.Compare(a[k].GetValue(), b[k].GetValue()); c != 0 {
				return c < 0
			}
		}
		return false
	})
	return &dto.MetricFamily{Name: ptr.To(f.m.name), Help: ptr.To(f.m.help), Type: f.m.typ.Enum(), Metric: f.samples}
}

// WriteResourceMetrics writes s as kubelet's /metrics/resource does: the node's,
// every pod's and every container's CPU time (core-seconds) and working set, the
// containers' start times, and the scrape error gauges (1 when scrapeErr; s is then
// nil and only they are written). Families with no sample are left out, as a registry
// leaves them out.
func WriteResourceMetrics(w io.Writer, s *statsapi.Summary, scrapeErr bool) error {
	fams := map[string]*family{}
	get := func(m resourceMetric) *family {
		f := fams[m.name]
		if f == nil {
			f = &family{m: m}
			fams[m.name] = f
		}
		return f
	}
	errValue := 0.0
	if scrapeErr {
		errValue = 1
	}
	get(resourceScrapeError).add(errValue, time.Time{})
	get(scrapeError).add(errValue, time.Time{})
	if s != nil {
		if c := s.Node.CPU; c != nil && c.UsageCoreNanoSeconds != nil {
			get(nodeCPU).add(seconds(*c.UsageCoreNanoSeconds), c.Time.Time)
		}
		if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
			get(nodeMemory).add(float64(*m.WorkingSetBytes), m.Time.Time)
		}
		for _, pod := range s.Pods {
			ns, name := pod.PodRef.Namespace, pod.PodRef.Name
			for _, c := range pod.Containers {
				if c.StartTime.Unix() > 0 {
					get(containerStart).add(float64(c.StartTime.UnixNano())/float64(time.Second), time.Time{}, c.Name, ns, name)
				}
				if cpu := c.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
					get(containerCPU).add(seconds(*cpu.UsageCoreNanoSeconds), cpu.Time.Time, c.Name, ns, name)
				}
				if m := c.Memory; m != nil && m.WorkingSetBytes != nil {
					get(containerMemory).add(float64(*m.WorkingSetBytes), m.Time.Time, c.Name, ns, name)
				}
			}
			if cpu := pod.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
				get(podCPU).add(seconds(*cpu.UsageCoreNanoSeconds), cpu.Time.Time, ns, name)
			}
			if m := pod.Memory; m != nil && m.WorkingSetBytes != nil {
				get(podMemory).add(float64(*m.WorkingSetBytes), m.Time.Time, ns, name)
			}
		}
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, n := range names {
		if err := enc.Encode(fams[n].proto()); err != nil {
			return err
		}
	}
	return nil
}

func seconds(ns uint64) float64 { return float64(ns) / float64(time.Second) }
