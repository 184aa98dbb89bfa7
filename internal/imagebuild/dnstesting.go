package imagebuild

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// glibcDNSTestingName is the e2e image the DNS conformance specs run their second
// querier in (upstream: Debian with dnsutils, "glibc-dns-testing", formerly
// jessie-dnsutils).
const glibcDNSTestingName = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"

// dnsToolLinks are the DNS tools the specs run (dig for the records, getent for the
// hosts file), links to the tranche binary, which runs them when started under those
// names (internal/agent/images/builtin); busybox's sh finds them on PATH, as neither is
// one of its applets.
var dnsToolLinks = []string{"usr/bin/dig", "usr/bin/getent"}

// glibcDNSTestingPlan is the glibc-dns-testing image: busybox, the tranche binary and
// the DNS tools' links, with a shell as its command.
func glibcDNSTestingPlan(ctx context.Context, src Source) (*plan, error) {
	base, bin, err := busyboxAndBinary(ctx, src)
	if err != nil {
		return nil, err
	}
	t := newTree("glibc-dns-testing")
	for _, l := range dnsToolLinks {
		t.symlink(l, "/tranche")
	}
	t.file("etc/nsswitch.conf", 0o644, "hosts: files dns\n")
	return &plan{
		layers: []*tree{base, bin, t},
		config: v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=" + defaultPath}},
	}, nil
}
