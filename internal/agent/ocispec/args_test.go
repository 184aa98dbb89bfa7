package ocispec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	crv1 "github.com/google/go-containerregistry/pkg/v1"
	v1 "k8s.io/api/core/v1"
)

func TestArgs(t *testing.T) {
	img := crv1.Config{Entrypoint: []string{"/entry"}, Cmd: []string{"--default"}}
	for _, tc := range []struct {
		name          string
		command, args []string
		img           crv1.Config
		want          []string
		wantErr       bool
	}{
		{name: "neither: entrypoint and cmd", img: img, want: []string{"/entry", "--default"}},
		{name: "command only: cmd ignored", command: []string{"/bin/x"}, img: img, want: []string{"/bin/x"}},
		{name: "args only: entrypoint and args", args: []string{"-v"}, img: img, want: []string{"/entry", "-v"}},
		{name: "both", command: []string{"/bin/x"}, args: []string{"-v"}, img: img, want: []string{"/bin/x", "-v"}},
		{name: "no entrypoint: cmd", img: crv1.Config{Cmd: []string{"sh", "-c", "true"}}, want: []string{"sh", "-c", "true"}},
		{name: `entrypoint [""] counts as none`, img: crv1.Config{Entrypoint: []string{""}, Cmd: []string{"sh"}}, want: []string{"sh"}},
		{name: "args with no entrypoint", args: []string{"echo", "hi"}, img: crv1.Config{Cmd: []string{"sh"}}, want: []string{"echo", "hi"}},
		{name: "nothing to run", img: crv1.Config{}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Args(&v1.Container{Command: tc.command, Args: tc.args}, tc.img)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Args (-want +got):\n%s", diff)
			}
		})
	}
}
