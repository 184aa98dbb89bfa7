package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"path"
	"strings"
)

// The Update Demo images of Kubernetes' e2e suite (test/images/nautilus and kitten):
// agnhost started as `agnhost test-webserver`, which serves the image's / on port 80,
// with a data.json naming the picture the demo shows and the picture beside it. The
// sig-cli specs 'Update Demo' read data.json through the pod proxy and check that it
// names nautilus.jpg (or kitten.jpg).
const (
	nautilusName = "registry.k8s.io/e2e-test-images/nautilus:1.8"
	kittenName   = "registry.k8s.io/e2e-test-images/kitten:1.8"
)

// updateDemoColors is the colour of each demo image's picture: the pictures are
// generated (a plain square), not upstream's photographs; the demo only needs a
// JPEG under the name data.json gives.
var updateDemoColors = map[string]color.RGBA{
	nautilusName: {R: 0x1f, G: 0x4e, B: 0x79, A: 0xff},
	kittenName:   {R: 0xe0, G: 0x8a, B: 0x2c, A: 0xff},
}

// updateDemoPlan is agnhost's image with one more layer holding /data.json and the
// picture it names, started as test-webserver.
func updateDemoPlan(ctx context.Context, src Source, name string) (*plan, error) {
	p, err := agnhostPlan(ctx, src)
	if err != nil {
		return nil, err
	}
	repo := path.Base(strings.SplitN(name, ":", 2)[0])
	picture := repo + ".jpg"
	jpg, err := squareJPEG(updateDemoColors[name])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", picture, err)
	}
	t := newTree("update demo " + repo)
	t.file("data.json", 0o644, fmt.Sprintf("{\n  \"image\": %q\n}\n", picture))
	t.file(picture, 0o644, jpg)
	if name == kittenName {
		kittenOSRelease(t)
	}
	p.layers = append(p.layers, t)
	p.config.Cmd = []string{"test-webserver"}
	p.config.ExposedPorts = map[string]struct{}{"80/tcp": {}}
	return p, nil
}

// squareJPEG encodes a 64x64 square of c; the encoder is deterministic, so the
// layer's digest is too.
func squareJPEG(c color.RGBA) (string, error) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	draw.Draw(img, img.Bounds(), &image.Uniform{C: c}, image.Point{}, draw.Src)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}); err != nil {
		return "", err
	}
	return b.String(), nil
}

// alpineOSRelease is Alpine Linux 3.21's os-release, the base of upstream's agnhost
// 2.66.1 (test/images/agnhost/BASEIMAGE) and so of its kitten image.
const alpineOSRelease = `NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.21.3
PRETTY_NAME="Alpine Linux v3.21"
HOME_URL="https://alpinelinux.org/"
BUG_REPORT_URL="https://gitlab.alpinelinux.org/alpine/aports/-/issues"
`

// kittenOSRelease adds Alpine's /etc/os-release, laid out as Alpine has it (a link to
// /usr/lib/os-release), to the kitten image. It is there for the conformance spec
// "[sig-node] ImageVolume should succeed with pod and pull policy of Always", which
// mounts the kitten image as a volume and reads data.json and etc/os-release from it,
// expecting "Alpine Linux"; tranche's agnhost is not Alpine-based and has no such file.
func kittenOSRelease(t *tree) {
	t.file("usr/lib/os-release", 0o644, alpineOSRelease)
	t.symlink("etc/os-release", "../usr/lib/os-release")
}
