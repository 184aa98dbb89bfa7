package metrics

import (
	"fmt"
	"io"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
)

// Point is one reading of a node's or a container's usage.
type Point struct {
	// Timestamp is when the counters were read (the sample's timestamp, or the
	// scrape's time when the sample has none).
	Timestamp time.Time
	// StartTime is when the container started (zero for a node, or when unknown): a
	// later start time means a restart, whose counters begin again.
	StartTime time.Time
	// CPU is the cumulative CPU time in nanoseconds.
	CPU uint64
	// Memory is the working set in bytes.
	Memory uint64
}

// Batch is what one scrape of one or more nodes found: the nodes' points, and per pod
// the points of its running containers. Only containers with both CPU and memory are
// kept, as metrics-server keeps them.
type Batch struct {
	Nodes map[string]Point
	Pods  map[types.NamespacedName]map[string]Point
}

// NewBatch returns an empty batch.
func NewBatch() *Batch {
	return &Batch{Nodes: map[string]Point{}, Pods: map[types.NamespacedName]map[string]Point{}}
}

// Merge adds other's points (of other nodes) to b.
func (b *Batch) Merge(other *Batch) {
	for n, p := range other.Nodes {
		b.Nodes[n] = p
	}
	for pod, cs := range other.Pods {
		b.Pods[pod] = cs
	}
}

// DecodeResourceMetrics reads a node's /metrics/resource (kubelet's resource metrics in
// Prometheus text format) into a batch with that node's point; samples without a
// timestamp get scrapedAt. Families it does not use are ignored.
func DecodeResourceMetrics(r io.Reader, node string, scrapedAt time.Time) (*Batch, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("resource metrics of node %s: %w", node, err)
	}
	b := NewBatch()
	at := func(m *dto.Metric) time.Time {
		if m.TimestampMs != nil {
			return time.UnixMilli(m.GetTimestampMs())
		}
		return scrapedAt
	}
	var nodePoint Point
	var nodeCPU, nodeMem bool
	for _, m := range fams["node_cpu_usage_seconds_total"].GetMetric() {
		nodePoint.CPU, nodePoint.Timestamp, nodeCPU = nanoseconds(value(m)), at(m), true
	}
	for _, m := range fams["node_memory_working_set_bytes"].GetMetric() {
		nodePoint.Memory, nodeMem = uint64(max(value(m), 0)), true
		if !nodeCPU {
			nodePoint.Timestamp = at(m)
		}
	}
	if nodeCPU && nodeMem {
		b.Nodes[node] = nodePoint
	}

	type key struct {
		pod       types.NamespacedName
		container string
	}
	keyOf := func(m *dto.Metric) (key, bool) {
		var k key
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "namespace":
				k.pod.Namespace = l.GetValue()
			case "pod":
				k.pod.Name = l.GetValue()
			case "container":
				k.container = l.GetValue()
			}
		}
		return k, k.pod.Name != "" && k.container != ""
	}
	points := map[key]*Point{}
	has := map[key]int{} // bit 1: cpu, bit 2: memory
	get := func(k key) *Point {
		p := points[k]
		if p == nil {
			p = &Point{}
			points[k] = p
		}
		return p
	}
	for _, m := range fams["container_cpu_usage_seconds_total"].GetMetric() {
		if k, ok := keyOf(m); ok {
			p := get(k)
			p.CPU, p.Timestamp = nanoseconds(value(m)), at(m)
			has[k] |= 1
		}
	}
	for _, m := range fams["container_memory_working_set_bytes"].GetMetric() {
		if k, ok := keyOf(m); ok {
			p := get(k)
			p.Memory = uint64(max(value(m), 0))
			if p.Timestamp.IsZero() {
				p.Timestamp = at(m)
			}
			has[k] |= 2
		}
	}
	for _, m := range fams["container_start_time_seconds"].GetMetric() {
		if k, ok := keyOf(m); ok {
			sec, frac := math.Modf(value(m))
			get(k).StartTime = time.Unix(int64(sec), int64(frac*1e9))
		}
	}
	for k, p := range points {
		if has[k] != 3 {
			continue
		}
		cs := b.Pods[k.pod]
		if cs == nil {
			cs = map[string]Point{}
			b.Pods[k.pod] = cs
		}
		cs[k.container] = *p
	}
	return b, nil
}

// value is a counter's or a gauge's value.
func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.GetUntyped().GetValue()
}

// nanoseconds converts core-seconds to nanoseconds (negative values to 0).
func nanoseconds(seconds float64) uint64 {
	if seconds <= 0 || math.IsNaN(seconds) {
		return 0
	}
	return uint64(math.Round(seconds * 1e9))
}
