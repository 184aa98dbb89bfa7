package builtin

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestMainAs(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		args    []string
		code    int
		handled bool
		stdout  string
		stderr  string
	}{
		{name: "tranche", args: []string{"dns"}},
		{name: "agnhost", args: []string{"pause"}, handled: true, stdout: "Paused"},
		{name: "agnhost", args: []string{"nope"}, code: 2, handled: true, stderr: `unknown subcommand "nope"; this agnhost (tranche's built-in servers) knows: echo, netexec, pause, serve-hostname, test-webserver`},
		{name: "agnhost", code: 2, handled: true, stderr: "no subcommand given"},
		{name: "agnhost", args: []string{"netexec", "--no-such-flag"}, code: 1, handled: true, stderr: "agnhost netexec:"},
		{name: "pause", args: []string{"ignored"}, handled: true, stdout: "Paused"},
	}
	for _, tc := range tests {
		t.Run(tc.name+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, handled := Main(cancelled, append([]string{"/" + tc.name}, tc.args...), &stdout, &stderr)
			if code != tc.code || handled != tc.handled {
				t.Errorf("Main = %d, %v; want %d, %v (stderr %q)", code, handled, tc.code, tc.handled, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stdout %q, stderr %q; want them to contain %q, %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
		})
	}
}
