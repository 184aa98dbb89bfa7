package imagestore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ErrInvalidName is wrapped by every error Normalize returns for a reference that does not
// parse; the agent maps it to the container reason InvalidImageName.
var ErrInvalidName = errors.New("invalid image name")

// dockerHub is the registry name Kubernetes and containerd print for Docker Hub; go-containerregistry
// spells it index.docker.io internally.
const dockerHub = "docker.io"

// invalidNameError carries kubelet's exact wording while still wrapping ErrInvalidName and the
// parser's own explanation.
type invalidNameError struct {
	msg   string
	cause error
}

func (e *invalidNameError) Error() string { return e.msg }

func (e *invalidNameError) Unwrap() []error { return []error{ErrInvalidName, e.cause} }

// Normalize turns an image reference into its fully qualified form as Kubernetes and containerd
// print it: "busybox" -> "docker.io/library/busybox:latest", "nginx:1.27" ->
// "docker.io/library/nginx:1.27", "registry.k8s.io/pause:3.10" unchanged, and a digest reference
// "repo@sha256:..." keeps its digest (a tag next to a digest is dropped: the digest alone names the
// content). An invalid reference returns an error wrapping ErrInvalidName whose message is kubelet's
// InvalidImageName wording, `Failed to apply default image tag "<ref>": couldn't parse image name
// "<ref>": invalid reference format` (with distribution's "repository name (...) must be lowercase"
// suffix when the only fault is upper case, as kubelet prints it).
func Normalize(ref string) (string, error) {
	parsed, err := name.ParseReference(ref)
	if err != nil || strings.TrimSpace(ref) != ref {
		if err == nil {
			err = errors.New("surrounding white space")
		}
		return "", invalidName(ref, err)
	}
	repo := parsed.Context()
	registry := repo.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = dockerHub
	}
	full := registry + "/" + repo.RepositoryStr()
	switch r := parsed.(type) {
	case name.Digest:
		return full + "@" + r.DigestStr(), nil
	case name.Tag:
		return full + ":" + r.TagStr(), nil
	default:
		return "", invalidName(ref, fmt.Errorf("unexpected reference kind %T", parsed))
	}
}

// invalidName builds kubelet's message. kubelet parses with distribution's reference package,
// which reports upper case in the repository path separately from other syntax errors; that
// check is reproduced here so the message matches what users see from a kubelet.
func invalidName(ref string, cause error) error {
	detail := "invalid reference format"
	if remainder := repositoryPath(ref); strings.ToLower(remainder) != remainder {
		detail += fmt.Sprintf(": repository name (%s) must be lowercase", remainder)
	}
	return &invalidNameError{
		msg:   fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %s", ref, ref, detail),
		cause: cause,
	}
}

// repositoryPath returns the repository part of ref as distribution's splitDockerDomain sees it:
// the registry host removed, "library/" added for Docker Hub's official images, tag and digest cut.
func repositoryPath(ref string) string {
	domain, remainder := dockerHub, ref
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		first := ref[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first {
			domain, remainder = first, ref[i+1:]
		}
	}
	if domain == "index.docker.io" {
		domain = dockerHub
	}
	if domain == dockerHub && !strings.ContainsRune(remainder, '/') {
		remainder = "library/" + remainder
	}
	if i := strings.IndexByte(remainder, '@'); i >= 0 {
		remainder = remainder[:i]
	}
	if i := strings.IndexByte(remainder, ':'); i >= 0 {
		remainder = remainder[:i]
	}
	return remainder
}
