// Package imagebuild builds the image catalog's images as real OCI images from the
// machine's own files, so that manifests naming busybox, agnhost, pause, nginx, postgres,
// the e2e suite's nautilus and kitten, or tranche itself run offline as containers with
// their own root file system.
//
// A build is a pure plan (which host file goes where, with which owner and mode) turned
// into layers in one step. Layers are uncompressed tar streams written in a fixed order
// with fixed times and owners, so identical inputs give identical digests, and parts
// that several images carry (the busybox base, the tranche binary) are identical layers
// that a content-addressed store keeps once. Key hashes the plan and the host files'
// metadata without reading their contents (stat calls, ELF headers and one busybox
// --list-full: under 0.1 s for the largest image, BenchmarkBuild), so a store can tell
// a cached build is current without building.
package imagebuild
