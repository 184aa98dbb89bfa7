package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tranche/tranche/internal/cluster"
	"github.com/tranche/tranche/internal/imagestore"
)

// registerImageGC adds kubelet's image garbage collection flags.
func registerImageGC(f *pflag.FlagSet, high, low *int) {
	f.IntVar(high, "image-gc-high-threshold", imagestore.DefaultGCHighThresholdPercent,
		"percent of disk use of the image store's file system at which unused images are removed, least recently used first (kubelet's imageGCHighThresholdPercent); 100 turns it off")
	f.IntVar(low, "image-gc-low-threshold", imagestore.DefaultGCLowThresholdPercent,
		"percent of disk use down to which the image garbage collection removes images (kubelet's imageGCLowThresholdPercent)")
}

// imageGCFlags are `tranche up`'s image garbage collection flags, passed to every agent.
type imageGCFlags struct{ high, low int }

func (g *imageGCFlags) register(cmd *cobra.Command) { registerImageGC(cmd.Flags(), &g.high, &g.low) }

// apply checks the thresholds and passes the ones given on to the agents.
func (g *imageGCFlags) apply(cmd *cobra.Command, cfg *cluster.Config) error {
	if err := (imagestore.GCPolicy{HighThresholdPercent: g.high, LowThresholdPercent: g.low}).Validate(); err != nil {
		return err
	}
	if cmd.Flags().Changed("image-gc-high-threshold") {
		cfg.ImageGC.HighThresholdPercent = &g.high
	}
	if cmd.Flags().Changed("image-gc-low-threshold") {
		cfg.ImageGC.LowThresholdPercent = &g.low
	}
	return nil
}
