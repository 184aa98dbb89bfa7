package ocispec

import (
	"errors"

	crv1 "github.com/google/go-containerregistry/pkg/v1"
	v1 "k8s.io/api/core/v1"
)

// errNoCommand is containerd's refusal of a container with nothing to run.
var errNoCommand = errors.New("no command specified")

// Args is the argv Kubernetes derives from the container's command and args and the
// image's ENTRYPOINT and CMD (the rule of "Define a Command and Arguments for a
// Container", implemented by containerd's CRI WithProcessArgs):
//
//   - neither command nor args: ENTRYPOINT + CMD;
//   - command only: command (CMD is ignored);
//   - args only: ENTRYPOINT + args;
//   - both: command + args.
//
// An ENTRYPOINT of exactly [""] (a Dockerfile's ENTRYPOINT [""]) counts as none. An
// empty result is an error, as containerd returns it.
func Args(c *v1.Container, img crv1.Config) ([]string, error) {
	command, args := c.Command, c.Args
	if len(command) == 0 {
		if len(args) == 0 {
			args = img.Cmd
		}
		if len(img.Entrypoint) != 1 || img.Entrypoint[0] != "" {
			command = img.Entrypoint
		}
	}
	if len(command) == 0 && len(args) == 0 {
		return nil, errNoCommand
	}
	out := make([]string, 0, len(command)+len(args))
	return append(append(out, command...), args...), nil
}
