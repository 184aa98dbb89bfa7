package cluster

import (
	"strconv"
	"time"
)

// ImageGC are the settings of the agents' image garbage collection, passed to each agent as
// kubelet's --image-gc-high-threshold, --image-gc-low-threshold and
// --minimum-image-ttl-duration, and --image-gc-period; nil leaves the agent's default.
type ImageGC struct {
	HighThresholdPercent *int           `json:"highThresholdPercent,omitempty"`
	LowThresholdPercent  *int           `json:"lowThresholdPercent,omitempty"`
	MinAge               *time.Duration `json:"minAge,omitempty"`
	Period               *time.Duration `json:"period,omitempty"`
}

// args are the agent flags for g.
func (g ImageGC) args() []string {
	var out []string
	if g.HighThresholdPercent != nil {
		out = append(out, "--image-gc-high-threshold", strconv.Itoa(*g.HighThresholdPercent))
	}
	if g.LowThresholdPercent != nil {
		out = append(out, "--image-gc-low-threshold", strconv.Itoa(*g.LowThresholdPercent))
	}
	if g.MinAge != nil {
		out = append(out, "--minimum-image-ttl-duration", g.MinAge.String())
	}
	if g.Period != nil {
		out = append(out, "--image-gc-period", g.Period.String())
	}
	return out
}
