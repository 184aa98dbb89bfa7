package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/agent/images"
	"github.com/tranche/tranche/internal/cluster"
	"github.com/tranche/tranche/internal/imagestore"
)

// imageCmd is `tranche image load|ls|rm`, on the host's image store that the nodes of a local
// cluster share (DATA/images).
func imageCmd() *cobra.Command {
	var names clusterNameFlags
	var imageDir string
	var store *imagestore.Store
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Load, list and remove the images of the local cluster's image store",
		Long: "The nodes of a local cluster share one image store, DATA/images. `image load` adds images from\n" +
			"docker-save tarballs and OCI layouts (as `kind load image-archive` and k3s's air-gap images); pods then\n" +
			"run them with any imagePullPolicy, Never included. The agents remove unused images themselves when the\n" +
			"disk fills (--image-gc-high-threshold of `tranche up`).",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var cfg cluster.Config
			if err := names.apply(cmd, &cfg); err != nil {
				return err
			}
			dir := imageDir
			if dir == "" {
				if _, err := os.Stat(cfg.DataDir); err != nil {
					return fmt.Errorf("no local cluster data in %s (start one with `tranche up`, or give --data-dir or --image-dir): %w", cfg.DataDir, err)
				}
				dir = filepath.Join(cfg.DataDir, "images")
			}
			var err error
			store, err = imagestore.Open(dir)
			return err
		},
	}
	names.register(cmd.PersistentFlags(), "directory of the cluster's data, whose images/ is the store")
	cmd.PersistentFlags().StringVar(&imageDir, "image-dir", "", "the image store itself (default DATA/images), as `tranche agent --image-dir`")

	var fallback string
	load := &cobra.Command{
		Use:   "load FILE...",
		Short: "Store the images of docker-save tarballs and OCI image layouts (directories or tarballs)",
		Long: "Store the images of each FILE: a `docker save` tarball (every image in it, under its RepoTags) or an OCI\n" +
			"image layout, as a directory or a tarball (named by its io.containerd.image.name annotation, or by\n" +
			"org.opencontainers.image.ref.name when that holds a full reference). Every layer is unpacked and checked\n" +
			"first: a file with paths leading outside the root, a layer that is not a tar or a manifest naming missing\n" +
			"files is refused whole, and nothing of it is stored.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fallback != "" && len(args) > 1 {
				return errors.New("--name names the one unnamed image of a single FILE; give one FILE with it")
			}
			var errs []error
			for _, f := range args {
				loaded, err := store.Load(cmd.Context(), f, fallback)
				for _, img := range loaded {
					fmt.Fprintf(cmd.OutOrStdout(), "Loaded image: %s (%s, %s)\n", strings.Join(userNames(img), ", "),
						shortID(img.Digest), imagestore.HumanSize(img.Size))
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
	load.Flags().StringVar(&fallback, "name", "", "name for an image the file does not name (a single one)")

	list := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the stored images: name, digest, size and the pods whose containers use them",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listImages(cmd.OutOrStdout(), store)
		},
	}

	var force bool
	remove := &cobra.Command{
		Use:     "rm NAME|DIGEST...",
		Aliases: []string{"rmi", "remove"},
		Short:   "Remove images with all their names, and the layers no other image uses",
		Long: "Remove each image, given by one of its names or its digest (manifest or config), with all its names,\n" +
			"then the blobs and unpacked layers no other image uses. An image that a container uses is refused, naming\n" +
			"its pods; with --force its names go at once and its content when the last of those containers is gone.\n" +
			"A catalog image (busybox, agnhost, pause, ...) is built again on its next use.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, ref := range args {
				img, err := store.Remove(cmd.Context(), ref, force)
				if err != nil && img.Digest == "" {
					errs = append(errs, err)
					continue
				}
				digests, tags := images.UserNames(img)
				for _, n := range append(tags, digests...) {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted: %s\n", n)
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove the names of an image in use too; its content stays until its containers are gone")

	cmd.AddCommand(load, list, remove)
	return cmd
}

// listImages prints one row per name of each image (its tags, or its digest name when it
// has no tag), with the pods whose containers use it.
func listImages(w io.Writer, store *imagestore.Store) error {
	images, err := store.List()
	if err != nil {
		return err
	}
	leases, err := store.Leases()
	if err != nil {
		return err
	}
	type row struct{ name, digest, size, pods string }
	var rows []row
	for _, img := range images {
		pods := map[string]bool{}
		for _, l := range leases {
			if l.Digest == img.Digest {
				pods[l.Pod] = true
			}
		}
		var users []string
		for p := range pods {
			users = append(users, p)
		}
		sort.Strings(users)
		for _, n := range userNames(img) {
			rows = append(rows, row{n, shortID(img.Digest), imagestore.HumanSize(img.Size), strings.Join(users, ",")})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tIN USE BY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.name, r.digest, r.size, r.pods)
	}
	return tw.Flush()
}

// userNames are an image's tags without the catalog's bookkeeping ones, or, for an image
// known by digest only, its digest names.
func userNames(img imagestore.Image) []string {
	digests, tags := images.UserNames(img)
	if len(tags) > 0 {
		return tags
	}
	if len(digests) > 0 {
		return digests
	}
	return []string{img.Digest}
}

// shortID is a digest's first 12 hex digits with its algorithm, as `crictl images` prints
// image IDs.
func shortID(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok {
		return d
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return algo + ":" + hex
}
