package e2e

import (
	"strings"
	"testing"
	"time"
)

// orphanPod is a pod no controller owns, labelled app=NAME.
func orphanPod(name, command string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  labels: {app: ` + name + `}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "` + command + `"]
`
}

// TestControllerRefAdoption: a ReplicaSet adopts a matching orphan instead
// of creating a pod and releases it once its labels stop matching; a Job
// adopts a running orphan with the tracking finalizer, so the orphan's
// success completes the Job without any pod of its own.
func TestControllerRefAdoption(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	owners := func(pod string) string {
		out, _, _ := s.kubectl(t, "", "get", "pod", pod, "-n", ns, "-o", `jsonpath={range .metadata.ownerReferences[*]}{.kind}/{.name}/{.controller}/{.blockOwnerDeletion} {end}`)
		return strings.TrimSpace(out)
	}

	t.Run("ReplicaSet", func(t *testing.T) {
		c.apply(t, ns, orphanPod("adoptee", "sleep 3600"))
		c.apply(t, ns, `apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: adopter
spec:
  replicas: 1
  selector:
    matchLabels: {app: adoptee}
  template:
    metadata:
      labels: {app: adoptee}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        command: ["sleep", "3600"]
`)
		eventually(t, 60*time.Second, "the orphan adopted by the ReplicaSet", func() (bool, string) {
			got := owners("adoptee")
			return got == "ReplicaSet/adopter/true/true", got
		})
		if out := s.must(t, "get", "pods", "-n", ns, "-l", "app=adoptee", "-o", "name"); strings.TrimSpace(out) != "pod/adoptee" {
			t.Fatalf("pods of the ReplicaSet after adoption: %q, want only the adopted one", out)
		}
		s.must(t, "label", "pod", "adoptee", "-n", ns, "app=released", "--overwrite")
		eventually(t, 60*time.Second, "the relabelled pod released and replaced", func() (bool, string) {
			got := owners("adoptee")
			out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=adoptee", "-o", "name")
			return got == "" && len(strings.Fields(out)) == 1, "owners " + got + "; pods " + out
		})
	})

	t.Run("Job", func(t *testing.T) {
		c.apply(t, ns, orphanPod("jobadoptee", "sleep 8"))
		c.apply(t, ns, `apiVersion: batch/v1
kind: Job
metadata:
  name: jobadopter
spec:
  manualSelector: true
  selector:
    matchLabels: {app: jobadoptee}
  completions: 1
  parallelism: 1
  template:
    metadata:
      labels: {app: jobadoptee}
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        command: ["sleep", "8"]
`)
		eventually(t, 60*time.Second, "the orphan adopted by the Job with its tracking finalizer", func() (bool, string) {
			got := owners("jobadoptee")
			fin, _, _ := s.kubectl(t, "", "get", "pod", "jobadoptee", "-n", ns, "-o", "jsonpath={.metadata.finalizers}")
			return got == "Job/jobadopter/true/true" && strings.Contains(fin, "batch.kubernetes.io/job-tracking"), got + " " + fin
		})
		eventually(t, 90*time.Second, "the Job complete through the adopted pod", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "job", "jobadopter", "-n", ns, "-o", "jsonpath={.status.succeeded}/{.status.conditions[?(@.type==\"Complete\")].status}")
			return out == "1/True", out
		})
		if out := s.must(t, "get", "pods", "-n", ns, "-l", "app=jobadoptee", "-o", "name"); strings.TrimSpace(out) != "pod/jobadoptee" {
			t.Fatalf("pods of the Job: %q, want only the adopted one", out)
		}
	})
}
