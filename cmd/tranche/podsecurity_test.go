package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/server"
)

// TestPodSecurityFlags: the flags fill server.Config.PodSecurity, kube-system is exempt
// unless told otherwise, and a bad level names its flag.
func TestPodSecurityFlags(t *testing.T) {
	parse := func(args ...string) (server.Config, error) {
		var p podSecurityFlags
		cmd := &cobra.Command{}
		p.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		var cfg server.Config
		return cfg, p.apply(&cfg)
	}
	cfg, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.PodSecurity.Defaults
	if d.Enforce != "privileged" || d.Warn != "privileged" || d.Audit != "privileged" {
		t.Errorf("defaults: %+v", d)
	}
	if diff := cmp.Diff([]string{"kube-system"}, cfg.PodSecurity.Exemptions.Namespaces); diff != "" {
		t.Errorf("exempt namespaces (-want +got):\n%s", diff)
	}
	cfg, err = parse("--pod-security-enforce=restricted", "--pod-security-warn=baseline", "--pod-security-audit=restricted",
		"--pod-security-exempt-namespaces=", "--pod-security-exempt-users=ci,ops", "--pod-security-exempt-runtime-classes=kata")
	if err != nil {
		t.Fatal(err)
	}
	d = cfg.PodSecurity.Defaults
	if d.Enforce != "restricted" || d.Warn != "baseline" || d.Audit != "restricted" {
		t.Errorf("defaults: %+v", d)
	}
	e := cfg.PodSecurity.Exemptions
	if len(e.Namespaces) != 0 || !cmp.Equal(e.Usernames, []string{"ci", "ops"}) || !cmp.Equal(e.RuntimeClasses, []string{"kata"}) {
		t.Errorf("exemptions: %+v", e)
	}
	_, err = parse("--pod-security-warn=strict")
	if want := `--pod-security-warn "strict": must be one of privileged, baseline, restricted`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
