package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tranche/tranche/internal/agent/node"
	"github.com/tranche/tranche/internal/cluster"
	"github.com/tranche/tranche/internal/imagestore"
)

// registerImageGC adds kubelet's image garbage collection flags, and the period of the
// collection, hidden: kubelet's is fixed, tests shorten it.
func registerImageGC(f *pflag.FlagSet, p *imagestore.GCPolicy, period *time.Duration) {
	f.IntVar(&p.HighThresholdPercent, "image-gc-high-threshold", imagestore.DefaultGCHighThresholdPercent,
		"percent of disk use of the image store's file system at which unused images are removed, least recently used first (kubelet's imageGCHighThresholdPercent); 100 turns it off")
	f.IntVar(&p.LowThresholdPercent, "image-gc-low-threshold", imagestore.DefaultGCLowThresholdPercent,
		"percent of disk use down to which the image garbage collection removes images (kubelet's imageGCLowThresholdPercent)")
	f.DurationVar(&p.MinAge, "minimum-image-ttl-duration", imagestore.DefaultGCMinAge,
		"minimum time since an unused image was last used or stored before it may be garbage collected (kubelet's imageMinimumGCAge)")
	f.DurationVar(period, "image-gc-period", node.ImageGCPeriod, "how often the image garbage collection runs")
	_ = f.MarkHidden("image-gc-period")
}

// imageGCFlags are `tranche up`'s image garbage collection flags, passed to every agent.
type imageGCFlags struct {
	policy imagestore.GCPolicy
	period time.Duration
}

func (g *imageGCFlags) register(cmd *cobra.Command) {
	registerImageGC(cmd.Flags(), &g.policy, &g.period)
}

// apply checks the settings and passes the ones given on to the agents.
func (g *imageGCFlags) apply(cmd *cobra.Command, cfg *cluster.Config) error {
	if err := g.policy.Validate(); err != nil {
		return err
	}
	changed := cmd.Flags().Changed
	if changed("image-gc-high-threshold") {
		cfg.ImageGC.HighThresholdPercent = &g.policy.HighThresholdPercent
	}
	if changed("image-gc-low-threshold") {
		cfg.ImageGC.LowThresholdPercent = &g.policy.LowThresholdPercent
	}
	if changed("minimum-image-ttl-duration") {
		cfg.ImageGC.MinAge = &g.policy.MinAge
	}
	if changed("image-gc-period") {
		cfg.ImageGC.Period = &g.period
	}
	return nil
}
