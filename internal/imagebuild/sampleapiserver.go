package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The images of the Aggregator conformance spec (Kubernetes' test/e2e/apimachinery/
// aggregator.go): a Deployment whose pod runs the sample API server, started by the
// image's entrypoint with upstream's flags, beside an etcd started as
// /usr/local/bin/etcd.
const (
	sampleAPIServerName = "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2"
	etcdName            = "registry.k8s.io/etcd:3.7.0-0"
)

// hostEtcdPrograms are the host's etcd programs (Debian's etcd-server and, when
// installed, etcd-client, put there by make deps) the etcd image carries in
// /usr/local/bin, where upstream's image has them; etcd itself is required.
var hostEtcdPrograms = []string{"/usr/bin/etcd", "/usr/bin/etcdctl", "/usr/bin/etcdutl"}

// sampleAPIServerPlan is the e2e sample-apiserver image: /sample-apiserver is a link to
// the tranche binary, which runs k8s.io/sample-apiserver's server command when started
// under that name (internal/agent/images/builtin), the image's entrypoint as upstream's.
func sampleAPIServerPlan(ctx context.Context, src Source) (*plan, error) {
	base, bin, err := busyboxAndBinary(ctx, src)
	if err != nil {
		return nil, err
	}
	t := newTree("sample-apiserver")
	t.symlink("sample-apiserver", "/tranche")
	return &plan{
		layers: []*tree{base, bin, t},
		config: v1.Config{Entrypoint: []string{"/sample-apiserver"}, Env: []string{"PATH=" + defaultPath}},
	}, nil
}

// etcdPlan is the etcd image: the host's etcd programs, with the libraries they load,
// linked from /usr/local/bin, and etcd as the command, on the busybox base (upstream's
// image has no shell; one costs nothing here, the base layer being shared). Its etcd is
// Debian's, not the image tag's version: the sample API server needs only the etcd v3
// API, which every etcd 3.x serves.
func etcdPlan(ctx context.Context, src Source) (*plan, error) {
	base, err := busyboxLayer(ctx, src)
	if err != nil {
		return nil, err
	}
	var programs []string
	for i, p := range hostEtcdPrograms {
		if _, err := os.Stat(p); err != nil {
			if i == 0 {
				return nil, fmt.Errorf("Debian's etcd-server is not installed (%w): install it (make deps)", err)
			}
			continue
		}
		programs = append(programs, p)
	}
	t := newTree("etcd")
	if err := addClosure(t, programs...); err != nil {
		return nil, err
	}
	for _, p := range programs {
		t.symlink(path.Join("usr/local/bin", path.Base(p)), p)
	}
	return &plan{
		layers: []*tree{base, t},
		config: v1.Config{
			Cmd:          []string{"/usr/local/bin/etcd"},
			Env:          []string{"PATH=" + defaultPath},
			ExposedPorts: map[string]struct{}{"2379/tcp": {}, "2380/tcp": {}},
		},
	}, nil
}

// aggregatorPlan chooses between the two images of the Aggregator spec.
func aggregatorPlan(ctx context.Context, src Source, name string) (*plan, error) {
	if name == etcdName {
		return etcdPlan(ctx, src)
	}
	return sampleAPIServerPlan(ctx, src)
}
