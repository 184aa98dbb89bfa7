package imagebuild

import (
	"context"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// nonewprivsName is the e2e image whose setuid-root program prints the effective uid
// it runs with ("Effective uid: N"): the SecurityContext AllowPrivilegeEscalation
// specs check that no_new_privs keeps a setuid program from gaining root.
const nonewprivsName = "registry.k8s.io/e2e-test-images/nonewprivs:1.4"

// nonewprivsPlan is the busybox base with /usr/local/bin/nnp, a copy of the tranche
// binary owned by root with the setuid bit, as upstream's image has its program: started
// under the name nnp it runs agnhost's nonewprivs, which prints the effective uid. On
// the host the copy lies in the image store, which only root can enter (0700).
func nonewprivsPlan(ctx context.Context, src Source) (*plan, error) {
	base, err := busyboxLayer(ctx, src)
	if err != nil {
		return nil, err
	}
	if _, err := binaryLayer(src); err != nil {
		return nil, err
	}
	fi, err := os.Stat(src.SelfExe)
	if err != nil {
		return nil, fmt.Errorf("tranche binary: %w", err)
	}
	t := newTree("nnp")
	n := hostNode("usr/local/bin/nnp", src.SelfExe, fi)
	n.mode = 0o4755
	t.add(n)
	return &plan{layers: []*tree{base, t}, config: v1.Config{Entrypoint: []string{"/usr/local/bin/nnp"}, Env: []string{"PATH=" + defaultPath}}}, nil
}
