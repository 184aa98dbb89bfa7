// Package benchreport prints the side-by-side table every tranche benchmark ends with:
// our figure, the figure it is compared with (a peer or a physical limit measured in
// the same run, or a goal), their ratio and the goal for that ratio.
package benchreport

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"text/tabwriter"
	"time"
)

// Row is one line of the table. Ratio is ours / reference; NaN or Inf prints as "-". A
// table whose rows all have an empty Goal prints no goal column.
type Row struct {
	Metric    string
	Ours      string
	Reference string
	Ratio     float64
	Goal      string
}

// Report collects the rows of every sub-benchmark. A sub-benchmark may run more than
// once (go test grows b.N), so a row is keyed by its metric and the last one wins.
type Report struct {
	mu    sync.Mutex
	order []string
	rows  map[string]Row
	notes []string
}

// New returns an empty Report.
func New() *Report { return &Report{rows: map[string]Row{}} }

// Set records or replaces the row for r.Metric.
func (rp *Report) Set(r Row) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if _, ok := rp.rows[r.Metric]; !ok {
		rp.order = append(rp.order, r.Metric)
	}
	rp.rows[r.Metric] = r
}

// Note adds a line printed under the table (set-up figures, caveats).
func (rp *Report) Note(format string, args ...any) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.notes = append(rp.notes, fmt.Sprintf(format, args...))
}

// Print writes the table and its notes.
func (rp *Report) Print(w io.Writer) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.order) == 0 {
		return
	}
	goals := false
	for _, r := range rp.rows {
		goals = goals || r.Goal != ""
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	if goals {
		fmt.Fprintln(tw, "metric\tours\treference\tratio\tgoal")
	} else {
		fmt.Fprintln(tw, "metric\tours\treference\tratio")
	}
	for _, m := range rp.order {
		r := rp.rows[m]
		ratio := "-"
		if !math.IsNaN(r.Ratio) && !math.IsInf(r.Ratio, 0) {
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		if goals {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Metric, r.Ours, r.Reference, ratio, r.Goal)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Metric, r.Ours, r.Reference, ratio)
		}
	}
	tw.Flush()
	for _, n := range rp.notes {
		fmt.Fprintln(w, "  "+n)
	}
	fmt.Fprintln(w)
}

// Ratio divides without dividing by zero (NaN prints as "-").
func Ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// Ms formats a duration in milliseconds with a precision that suits its size, and in
// seconds from one second on.
func Ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.2f s", v/1000)
}

// Percentile returns the p-th percentile (nearest rank) of ds, which it sorts.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := (len(ds)*p + 99) / 100
	return ds[max(rank-1, 0)]
}
