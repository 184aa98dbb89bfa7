package endpointslice

import (
	"time"

	"github.com/tranche/tranche/bench/benchreport"
)

// The summary table is benchreport's; these names keep the benchmark's code short.
type (
	row    = benchreport.Row
	report = benchreport.Report
)

var (
	newReport  = benchreport.New
	ms         = benchreport.Ms
	ratio      = benchreport.Ratio
	percentile = benchreport.Percentile
)

// msf converts a duration to fractional milliseconds for ReportMetric.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
