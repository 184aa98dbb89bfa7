package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/events"
)

// TestEventsShowInKubectl records an event with the recorder components use and finds
// it in `kubectl get events` and `kubectl describe`.
func TestEventsShowInKubectl(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	c := s.client(t)
	s.must(t, "create", "configmap", "noted", "-n", ns)
	cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), "noted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := events.NewRecorder(ctx, c, "e2e-test")
	rec.Event(cm, v1.EventTypeWarning, "Checked", "the e2e test looked at this object")
	eventually(t, 15*time.Second, "event listed", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns)
		return regexp.MustCompile(`(?m)^\S+\s+Warning\s+Checked\s+configmap/noted\s+the e2e test looked at this object$`).MatchString(out), out
	})
	out := s.must(t, "describe", "configmap", "noted", "-n", ns)
	if !strings.Contains(out, "Events:") || !regexp.MustCompile(`Warning\s+Checked\s+\S+\s+e2e-test\s+the e2e test looked at this object`).MatchString(out) {
		t.Fatalf("describe does not show the event:\n%s", out)
	}
	if out := s.must(t, "get", "events.events.k8s.io", "-n", ns, "-o", "jsonpath={.items[0].reason} {.items[0].regarding.name}"); out != "Checked noted" {
		t.Fatalf("events.k8s.io view: %q", out)
	}
}
