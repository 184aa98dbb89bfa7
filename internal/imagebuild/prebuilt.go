package imagebuild

import "embed"

// prebuilt holds what `make build` compiles before the tranche binary: the pause
// program (prebuilt/README.md says more). A plain `go build` embeds only the README.
//
//go:embed prebuilt
var prebuilt embed.FS

// EmbeddedPause is the pause program embedded in this binary (see Source.Pause), or
// nil when the binary was built without it.
func EmbeddedPause() []byte {
	b, err := prebuilt.ReadFile("prebuilt/pause")
	if err != nil {
		return nil
	}
	return b
}
