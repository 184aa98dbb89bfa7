package cluster

import (
	"fmt"

	"github.com/tranche/tranche/bench/benchreport"
)

// The summary table is benchreport's; these names keep the benchmark's code short.
type (
	row    = benchreport.Row
	report = benchreport.Report
)

var (
	newReport = benchreport.New
	ms        = benchreport.Ms
	ratio     = benchreport.Ratio
)

// mb formats bytes in decimal megabytes, the unit the RSS goal is stated in.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
