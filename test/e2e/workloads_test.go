package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWorkloads runs seed 000's specialised reconcilers on their own `tranche up --nodes
// 4` with the real kubectl: the StatefulSet creates its postgres pods in order with their
// own claims, Jobs complete or fail after backoffLimit, a CronJob's Job can be started by
// hand, a Deployment rolls out, back, restarts and scales (these in parallel, each in its
// namespace), then the DaemonSet follows the nodes.
func TestWorkloads(t *testing.T) {
	c := upOwn(t, "tw", 4)
	seed := seedDocs(t, "testdata/000-ds-sts-job.yaml")
	t.Run("scenarios", func(t *testing.T) {
		t.Run("StatefulSetIdentityAndStorage", func(t *testing.T) { t.Parallel(); testStatefulSet(t, c, seed["StatefulSet"]) })
		t.Run("JobCompletes", func(t *testing.T) { t.Parallel(); testJobCompletes(t, c) })
		t.Run("JobFailsAfterBackoffLimit", func(t *testing.T) { t.Parallel(); testJobFails(t, c) })
		t.Run("CronJobManualRun", func(t *testing.T) { t.Parallel(); testCronJobManualRun(t, c) })
		t.Run("CronJobOnSchedule", func(t *testing.T) { t.Parallel(); testCronJobOnSchedule(t, c) })
		t.Run("DeploymentRollout", func(t *testing.T) { t.Parallel(); testDeploymentRollout(t, c) })
	})
	// Last and alone: it adds and removes a node, and a pod of another scenario
	// left on the removed node would never finish terminating.
	t.Run("DaemonSetFollowsNodes", func(t *testing.T) { testDaemonSetFollowsNodes(t, c, logCollectorSet(t, seed["DaemonSet"])) })
}

// seedDocs splits a multi-document manifest by the kind of each document.
func seedDocs(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	kind := regexp.MustCompile(`(?m)^kind: (\w+)$`)
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if m := kind.FindStringSubmatch(doc); m != nil {
			docs[m[1]] = doc
		}
	}
	return docs
}

func (c *localCluster) apply(t *testing.T, ns, manifest string) {
	t.Helper()
	if out, errOut, err := c.srv.kubectl(t, manifest, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
}

// waitRow polls `kubectl get <what> -n ns --no-headers` until it matches re.
func (c *localCluster) waitRow(t *testing.T, timeout time.Duration, ns, what string, re *regexp.Regexp) string {
	t.Helper()
	var row string
	eventually(t, timeout, "kubectl get "+what+" matching "+re.String(), func() (bool, string) {
		row, _, _ = c.srv.kubectl(t, "", "get", what, "-n", ns, "--no-headers")
		return re.MatchString(row), row
	})
	return row
}

// collectorImage and collectorUpdate stand in for the seed's fluent/fluent-bit:3.0 and
// the 3.1 the test rolls out: the pause image, which runs until it is stopped as the
// collector does, in two tags of the node's catalog.
const (
	collectorImage  = "registry.k8s.io/pause:3.10"
	collectorUpdate = "registry.k8s.io/pause:3.9"
)

// logCollectorSet is seed 000's log-collector DaemonSet with one change: fluent-bit
// is not in the node's image catalog and tranche does not pull from registries, so
// as written its pods would stay in ImagePullBackOff, never Ready; the pause image
// takes its place. What the test checks (one pod per node following the nodes, a
// rolling update) does not depend on what the container runs, and the pods still mount
// the node's /var/log, at a path the pause image does not have.
func logCollectorSet(t *testing.T, seed string) string {
	t.Helper()
	const image = "          image: fluent/fluent-bit:3.0\n"
	if !strings.Contains(seed, image) {
		t.Fatalf("the seed's DaemonSet no longer has %q", image)
	}
	return strings.Replace(seed, image, "          image: "+collectorImage+"\n", 1)
}

// testDaemonSetFollowsNodes: the seed's log-collector (logCollectorSet) shows DESIRED 4
// CURRENT 4 READY 4, one pod per node; `tranche node add` brings 5/5/5 with the new
// node's pod Running there; after `tranche node remove` it is back to 4 and a rolling
// update still goes through, although the gone node's pod never finishes terminating
// (no kubelet is left to finish it).
func testDaemonSetFollowsNodes(t *testing.T, c *localCluster, ds string) {
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, ds)
	c.waitRow(t, 60*time.Second, ns, "ds/log-collector", regexp.MustCompile(`^log-collector\s+4\s+4\s+4\s+4\s+4\s+<none>\s`))
	out := s.must(t, "rollout", "status", "ds/log-collector", "-n", ns, "--timeout=30s")
	if !strings.Contains(out, `daemon set "log-collector" successfully rolled out`) {
		t.Fatalf("rollout status: %s", out)
	}
	nodes := strings.Fields(s.must(t, "get", "pods", "-n", ns, "-l", "app=log-collector", "-o", "jsonpath={.items[*].spec.nodeName}"))
	if seen := map[string]bool{}; len(nodes) != 4 || func() bool {
		for _, n := range nodes {
			seen[n] = true
		}
		return len(seen) != 4
	}() {
		t.Fatalf("want one pod on each of the 4 nodes, got %v", nodes)
	}
	if out, err := exec.Command(trancheBin, "node", "add", "tranche-5", "--data-dir", c.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("node add: %v\n%s", err, out)
	}
	c.waitRow(t, 60*time.Second, ns, "ds/log-collector", regexp.MustCompile(`^log-collector\s+5\s+5\s+5\s+5\s+5\s+<none>\s`))
	out = s.must(t, "get", "pods", "-n", ns, "-l", "app=log-collector", "--field-selector", "spec.nodeName=tranche-5", "--no-headers")
	if !regexp.MustCompile(`^log-collector-\w{5}\s+1/1\s+Running\s`).MatchString(out) {
		t.Fatalf("the new node's pod:\n%s", out)
	}
	out = s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=DaemonSet,reason=SuccessfulCreate", "--no-headers")
	if n := strings.Count(out, "Created pod: log-collector-"); n != 5 {
		t.Fatalf("want 5 SuccessfulCreate events, got %d:\n%s", n, out)
	}
	if out, err := exec.Command(trancheBin, "node", "remove", "tranche-5", "--data-dir", c.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("node remove: %v\n%s", err, out)
	}
	c.waitRow(t, 60*time.Second, ns, "ds/log-collector", regexp.MustCompile(`^log-collector\s+4\s+4\s+4\s+4\s+4\s+<none>\s`))
	s.must(t, "set", "image", "ds/log-collector", "collector="+collectorUpdate, "-n", ns)
	out = s.must(t, "rollout", "status", "ds/log-collector", "-n", ns, "--timeout=45s")
	if !strings.Contains(out, `daemon set "log-collector" successfully rolled out`) {
		t.Fatalf("rollout status after the update: %s", out)
	}
	out = s.must(t, "get", "pods", "-n", ns, "-l", "app=log-collector,pod-template-generation=2", "-o", "jsonpath={.items[*].spec.containers[0].image}")
	if out != strings.TrimSpace(strings.Repeat(collectorUpdate+" ", 4)) {
		t.Fatalf("want 4 pods of the second template, got images %q", out)
	}
}

// postgresSet is seed 000's postgres StatefulSet as written, with what the postgres
// image needs and the seed leaves out: a superuser password (the image refuses to
// initialise without one) and the headless Service its serviceName names; a readiness
// probe on the port makes "Ready before the next ordinal" mean "accepts connections".
func postgresSet(t *testing.T, seed string) string {
	t.Helper()
	const image = "          image: postgres:16\n"
	if !strings.Contains(seed, image) {
		t.Fatalf("the seed's StatefulSet no longer has %q", image)
	}
	return `apiVersion: v1
kind: Service
metadata:
  name: postgres
spec:
  clusterIP: None
  selector:
    app: postgres
  ports:
  - port: 5432
---
` + strings.Replace(seed, image, image+`          env:
            - {name: POSTGRES_PASSWORD, value: s3cret}
          readinessProbe:
            tcpSocket: {port: 5432}
            periodSeconds: 1
`, 1)
}

// testStatefulSet: postgres-0, -1, -2 are created in order, each once the previous is
// Ready, with claims data-postgres-0..2 Bound; a row written in postgres-1 with psql
// is read back from the postgres-1 that replaces it after `kubectl delete pod`, with
// the same hostname and claim.
func testStatefulSet(t *testing.T, c *localCluster, seed string) {
	s := c.srv
	ns := s.namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := s.client(t).CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=postgres"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c.apply(t, ns, postgresSet(t, seed))
	t.Cleanup(func() {
		if t.Failed() {
			for i := range 3 {
				t.Logf("postgres-%d output:\n%s", i, tail(c.podLog(t, ns, fmt.Sprintf("postgres-%d", i), "postgres"), 1500))
			}
		}
	})
	// Follow the pods as `kubectl get pods -w` would: a pod may appear only once
	// its predecessor is Ready.
	ready := map[string]bool{}
	var order []string
	deadline := time.After(90 * time.Second)
	for !ready["postgres-2"] {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("pod watch closed; seen %v", order)
			}
			pod, isPod := ev.Object.(*v1.Pod)
			if !isPod || ev.Type == watch.Deleted {
				continue
			}
			if ev.Type == watch.Added {
				order = append(order, pod.Name)
				var i int
				if _, err := fmt.Sscanf(pod.Name, "postgres-%d", &i); err != nil {
					t.Fatalf("unexpected pod %s", pod.Name)
				}
				if i > 0 && !ready[fmt.Sprintf("postgres-%d", i-1)] {
					t.Fatalf("%s created before postgres-%d was Ready (created so far: %v)", pod.Name, i-1, order)
				}
			}
			ready[pod.Name] = podReady(pod)
		case <-deadline:
			t.Fatalf("postgres-0..2 not all Ready within 90s; created %v, ready %v", order, ready)
		}
	}
	if strings.Join(order, " ") != "postgres-0 postgres-1 postgres-2" {
		t.Fatalf("creation order %v", order)
	}
	c.waitRow(t, 30*time.Second, ns, "sts/postgres", regexp.MustCompile(`^postgres\s+3/3\s`))
	out := s.must(t, "get", "pvc", "-n", ns, "-l", "app=postgres", "--no-headers")
	for i := range 3 {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^data-postgres-%d\s+Bound\s+pvc-\S+\s+10Gi\s+RWO\s`, i)).MatchString(out) {
			t.Fatalf("claim data-postgres-%d not Bound:\n%s", i, out)
		}
	}
	if got := s.must(t, "get", "pod", "postgres-1", "-n", ns, "-o", "jsonpath={.spec.hostname} {.spec.subdomain}"); got != "postgres-1 postgres" {
		t.Fatalf("hostname and subdomain of postgres-1: %q", got)
	}
	psql := func(sql string) (string, error) {
		ip := s.must(t, "get", "pod", "postgres-1", "-n", ns, "-o", "jsonpath={.status.podIP}")
		return c.inNodeNS(t, ns, "postgres-1", []string{"PGPASSWORD=s3cret", "PGCONNECT_TIMEOUT=5"},
			"psql", "-h", ip, "-U", "postgres", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql)
	}
	if out, err := psql("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('written in postgres-1');"); err != nil {
		t.Fatalf("psql in postgres-1: %v\n%s", err, out)
	}
	oldUID := s.must(t, "get", "pod", "postgres-1", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	claimUID := s.must(t, "get", "pvc", "data-postgres-1", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	s.must(t, "delete", "pod", "postgres-1", "-n", ns, "--timeout=45s")
	eventually(t, 60*time.Second, "a new postgres-1 Running and Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "postgres-1", "-n", ns, "-o",
			`jsonpath={.metadata.uid} {.status.phase} {.status.conditions[?(@.type=="Ready")].status}`)
		return !strings.HasPrefix(out, oldUID) && strings.HasSuffix(out, " Running True"), out
	})
	if got := s.must(t, "get", "pod", "postgres-1", "-n", ns, "-o", `jsonpath={.spec.volumes[?(@.name=="data")].persistentVolumeClaim.claimName}`); got != "data-postgres-1" {
		t.Fatalf("recreated postgres-1 mounts claim %q", got)
	}
	if got := s.must(t, "get", "pvc", "data-postgres-1", "-n", ns, "-o", "jsonpath={.metadata.uid}"); got != claimUID {
		t.Fatalf("data-postgres-1 was replaced (uid %s, was %s)", got, claimUID)
	}
	if out, err := psql("SELECT v FROM kept;"); err != nil || strings.TrimSpace(out) != "written in postgres-1" {
		t.Fatalf("the row from the recreated postgres-1: %v %q", err, out)
	}
}

func podReady(pod *v1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == v1.PodReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

// migrationJob is seed 000's migration Job with busybox running a stand-in for
// ./migrate (the seed's image myregistry/db-migrate:1.4 is not in the node's catalog
// and tranche does not pull from registries, so as written it would stay in
// ImagePullBackOff): `sh -c SCRIPT`, and backoffLimit as given.
const migrationJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: %s
spec:
  completions: 1
  backoffLimit: %d
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
        - name: migrate
          image: busybox
          command: ["sh", "-c", %q]
`

// testJobCompletes: COMPLETIONS goes 0/1 -> 1/1 and the Job is Complete, with one pod.
func testJobCompletes(t *testing.T, c *localCluster) {
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, fmt.Sprintf(migrationJob, "migration", 3, "sleep 2; echo migrated to v42"))
	out := s.must(t, "get", "job", "migration", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+STATUS\s+COMPLETIONS\s+DURATION\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^migration\s+Running\s+0/1\s`).MatchString(out) {
		t.Fatalf("a new Job:\n%s", out)
	}
	c.waitRow(t, 60*time.Second, ns, "job/migration", regexp.MustCompile(`^migration\s+Complete\s+1/1\s+\d+s\s`))
	if got := s.must(t, "get", "job", "migration", "-n", ns, "-o",
		`jsonpath={.status.succeeded} {.status.conditions[?(@.type=="Complete")].status} {.status.completionTime}`); !regexp.MustCompile(`^1 True \S+$`).MatchString(got) {
		t.Fatalf("status of the complete Job: %q", got)
	}
	out = s.must(t, "get", "pods", "-n", ns, "-l", "job-name=migration", "--no-headers")
	if !regexp.MustCompile(`^migration-\w{5}\s+0/1\s+Completed\s+0\s`).MatchString(out) || strings.Count(out, "\n") != 1 {
		t.Fatalf("want one Completed pod:\n%s", out)
	}
	out = s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=migration", "-o", "jsonpath={.items[*].reason}")
	for _, reason := range []string{"SuccessfulCreate", "Completed"} {
		if !strings.Contains(out, reason) {
			t.Fatalf("Job events lack %s: %s", reason, out)
		}
	}
}

// testJobFails: a migration that exits 1 with backoffLimit 1 is retried once (after the
// 10 s backoff) and ends Failed with reason BackoffLimitExceeded.
func testJobFails(t *testing.T, c *localCluster) {
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, fmt.Sprintf(migrationJob, "migration", 1, "echo schema mismatch; exit 1"))
	c.waitRow(t, 60*time.Second, ns, "job/migration", regexp.MustCompile(`^migration\s+Failed\s+0/1\s`))
	got := s.must(t, "get", "job", "migration", "-n", ns, "-o",
		`jsonpath={.status.failed} {.status.conditions[?(@.type=="Failed")].reason}`)
	if got != "2 BackoffLimitExceeded" {
		t.Fatalf("failed count and reason: %q", got)
	}
	out := s.must(t, "get", "pods", "-n", ns, "-l", "job-name=migration", "--no-headers")
	if n := len(regexp.MustCompile(`(?m)^migration-\w{5}\s+0/1\s+Error\s`).FindAllString(out, -1)); n != 2 {
		t.Fatalf("want 2 pods in Error:\n%s", out)
	}
	out = s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=migration,reason=BackoffLimitExceeded", "--no-headers")
	if !strings.Contains(out, "Job has reached the specified backoff limit") {
		t.Fatalf("no BackoffLimitExceeded event: %q", out)
	}
}

const reportCronJob = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
spec:
  schedule: "*/1 * * * *"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: report
              image: busybox
              command: ["sh", "-c", "echo report"]
`

// testCronJobManualRun: the schedule itself is tested with a fake clock in the
// controller's unit tests; here `kubectl create job --from=cronjob/report` runs the
// (suspended) CronJob's template, the Job is the CronJob's, and the CronJob records
// its success.
func testCronJobManualRun(t *testing.T, c *localCluster) {
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, reportCronJob)
	out := s.must(t, "get", "cronjob", "report", "-n", ns)
	if !regexp.MustCompile(`(?m)^report\s+\*/1 \* \* \* \*\s+<none>\s+True\s+0\s+<none>\s+\d+s$`).MatchString(out) {
		t.Fatalf("cronjob table:\n%s", out)
	}
	s.must(t, "create", "job", "report-by-hand", "--from=cronjob/report", "-n", ns)
	c.waitRow(t, 60*time.Second, ns, "job/report-by-hand", regexp.MustCompile(`^report-by-hand\s+Complete\s+1/1\s`))
	owner := s.must(t, "get", "job", "report-by-hand", "-n", ns, "-o",
		`jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.annotations.cronjob\.kubernetes\.io/instantiate}`)
	if owner != "CronJob/report manual" {
		t.Fatalf("owner and annotation of the manual Job: %q", owner)
	}
	eventually(t, 30*time.Second, "the CronJob's lastSuccessfulTime", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "cronjob", "report", "-n", ns, "-o", "jsonpath={.status.lastSuccessfulTime}")
		return out != "", out
	})
	if got := s.must(t, "get", "jobs", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"); got != "report-by-hand" {
		t.Fatalf("a suspended CronJob started Jobs: %s", got)
	}
}

// testCronJobOnSchedule: the same CronJob, not suspended, starts a Job by itself at the
// next minute on the real clock (at most a minute's wait, beside the other scenarios):
// the Job is named after its scheduled minute as upstream names it, completes, and the
// CronJob records a last schedule and a last success from then on.
func testCronJobOnSchedule(t *testing.T, c *localCluster) {
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, strings.Replace(reportCronJob, "suspend: true", "suspend: false", 1))
	var job string
	eventually(t, 150*time.Second, "a Job started by the schedule", func() (bool, string) {
		job, _, _ = s.kubectl(t, "", "get", "jobs", "-n", ns, "-o", "jsonpath={.items[0].metadata.name}")
		return job != "", job
	})
	minute, err := strconv.ParseInt(strings.TrimPrefix(job, "report-"), 10, 64)
	if err != nil || !strings.HasPrefix(job, "report-") {
		t.Fatalf("Job %q is not named report-<scheduled minute>", job)
	}
	scheduled := time.Unix(minute*60, 0).UTC()
	if d := time.Since(scheduled); d < 0 || d > 3*time.Minute {
		t.Fatalf("Job %s is for %s, %s from now", job, scheduled, -d)
	}
	c.waitRow(t, 60*time.Second, ns, "job/"+job, regexp.MustCompile(`^`+job+`\s+Complete\s+1/1\s`))
	if owner := s.must(t, "get", "job", job, "-n", ns, "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}"); owner != "CronJob/report" {
		t.Fatalf("owner of %s: %q", job, owner)
	}
	eventually(t, 30*time.Second, "the CronJob's last schedule and success", func() (bool, string) {
		// A later minute may have started another Job meanwhile: its times are later.
		// The API keeps whole seconds, so a Job done within its first second shows its
		// scheduled time as its completion.
		out, _, _ := s.kubectl(t, "", "get", "cronjob", "report", "-n", ns, "-o", "jsonpath={.status.lastScheduleTime} {.status.lastSuccessfulTime}")
		f := strings.Fields(out)
		if len(f) != 2 {
			return false, out
		}
		last, err1 := time.Parse(time.RFC3339, f[0])
		success, err2 := time.Parse(time.RFC3339, f[1])
		return err1 == nil && err2 == nil && !last.Before(scheduled) && !success.Before(scheduled), out
	})
}

const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: busybox
        command: ["sh", "-c", "echo ok > /tmp/healthz; exec busybox httpd -f -p 8080 -h /tmp"]
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
`

// testDeploymentRollout: a rolling update that `kubectl rollout status` follows to the
// end, `rollout undo` restoring the previous template (as revision 3), `rollout
// restart`, and `kubectl scale`.
func testDeploymentRollout(t *testing.T, c *localCluster) {
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, webDeployment)
	rolledOut := func() {
		t.Helper()
		out := s.must(t, "rollout", "status", "deploy/web", "-n", ns, "--timeout=90s")
		if !strings.Contains(out, `deployment "web" successfully rolled out`) {
			t.Fatalf("rollout status: %s", out)
		}
	}
	rolledOut()
	firstRS := s.must(t, "get", "rs", "-n", ns, "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}")
	s.must(t, "set", "image", "deploy/web", "web=busybox:1.36", "-n", ns)
	rolledOut()
	out := s.must(t, "get", "rs", "-n", ns, "-l", "app=web", "--no-headers")
	if !regexp.MustCompile(`(?m)^`+firstRS+`\s+0\s+0\s+0\s`).MatchString(out) ||
		len(regexp.MustCompile(`(?m)^web-\w+\s+3\s+3\s+3\s`).FindAllString(out, -1)) != 1 {
		t.Fatalf("after the update, want the first ReplicaSet at 0 and one at 3/3/3:\n%s", out)
	}
	out = s.must(t, "rollout", "history", "deploy/web", "-n", ns)
	if !regexp.MustCompile(`(?m)^1\s+<none>\n2\s+<none>$`).MatchString(out) {
		t.Fatalf("rollout history:\n%s", out)
	}
	s.must(t, "rollout", "undo", "deploy/web", "-n", ns)
	rolledOut()
	got := s.must(t, "get", "deploy", "web", "-n", ns, "-o",
		`jsonpath={.spec.template.spec.containers[0].image} {.metadata.annotations.deployment\.kubernetes\.io/revision}`)
	if got != "busybox 3" {
		t.Fatalf("after undo, image and revision: %q", got)
	}
	out = s.must(t, "get", "rs", "-n", ns, "-l", "app=web", "--no-headers")
	if !regexp.MustCompile(`(?m)^` + firstRS + `\s+3\s+3\s+3\s`).MatchString(out) {
		t.Fatalf("undo did not bring back %s:\n%s", firstRS, out)
	}
	s.must(t, "rollout", "restart", "deploy/web", "-n", ns)
	rolledOut()
	if got := s.must(t, "get", "deploy", "web", "-n", ns, "-o", `jsonpath={.spec.template.metadata.annotations.kubectl\.kubernetes\.io/restartedAt} {.metadata.annotations.deployment\.kubernetes\.io/revision}`); !regexp.MustCompile(`^\S+ 4$`).MatchString(got) {
		t.Fatalf("after restart, restartedAt and revision: %q", got)
	}
	if n := strings.Count(s.must(t, "get", "rs", "-n", ns, "-l", "app=web", "--no-headers"), "\n"); n != 3 {
		t.Fatalf("want 3 ReplicaSets after restart, got %d", n)
	}
	s.must(t, "scale", "deploy/web", "--replicas=5", "-n", ns)
	rolledOut()
	c.waitRow(t, 60*time.Second, ns, "deploy/web", regexp.MustCompile(`^web\s+5/5\s+5\s+5\s`))
	out = s.must(t, "get", "deploy", "web", "-n", ns, "-o",
		`jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason} {end}`)
	for _, want := range []string{"Available=True/MinimumReplicasAvailable", "Progressing=True/NewReplicaSetAvailable"} {
		if !strings.Contains(out, want) {
			t.Fatalf("conditions lack %s: %s", want, out)
		}
	}
	out = s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=Deployment,reason=ScalingReplicaSet", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
	if !strings.Contains(out, "Scaled up replica set "+firstRS+" from 0 to 3") || !regexp.MustCompile(`Scaled up replica set web-\w+ from 3 to 5`).MatchString(out) {
		t.Fatalf("ScalingReplicaSet events:\n%s", out)
	}
}
