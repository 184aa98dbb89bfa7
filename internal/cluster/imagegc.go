package cluster

import "strconv"

// ImageGC are the thresholds of the agents' image garbage collection, passed to each agent
// as kubelet's --image-gc-high-threshold and --image-gc-low-threshold; nil leaves the agent's
// default (85 and 80).
type ImageGC struct {
	HighThresholdPercent, LowThresholdPercent *int
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
	return out
}
