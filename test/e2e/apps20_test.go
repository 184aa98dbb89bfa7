package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Issue 20, engineer apps: the sig-apps and sig-cli [Conformance] specs on
// ReplicaSets, ReplicationControllers, StatefulSets and the Update Demo, each
// checked here the way its spec checks it.

// proxyGet reads pods/NAME/proxy/SUFFIX through the API server, as the specs do.
func proxyGet(ctx context.Context, c kubernetes.Interface, ns, pod, suffix string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := c.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").SubResource("proxy").Name(pod)
	if suffix != "" {
		req = req.Suffix(suffix)
	}
	body, err := req.Do(ctx).Raw()
	return string(body), err
}

// runningPods polls until selector selects exactly n pods, all Running, and
// returns their names.
func runningPods(t *testing.T, c kubernetes.Interface, ns, selector string, n int, timeout time.Duration) []string {
	t.Helper()
	var names []string
	eventually(t, timeout, fmt.Sprintf("%d running pods %s", n, selector), func() (bool, string) {
		pods, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		names = names[:0]
		var state []string
		for _, p := range pods.Items {
			state = append(state, p.Name+"="+string(p.Status.Phase))
			if p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		return len(names) == n && len(pods.Items) == n, strings.Join(state, " ")
	})
	return names
}

// TestAppsServeHostnameThroughPodProxy: pods/NAME/proxy without a port reaches
// the first port the container declares (serve-hostname's 9376), as the specs
// 'ReplicaSet/ReplicationController should serve a basic image on each
// replica' read each replica's name.
func TestAppsServeHostnameThroughPodProxy(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, `apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: hostname}
spec:
  replicas: 2
  selector: {matchLabels: {app: hostname}}
  template:
    metadata: {labels: {app: hostname}}
    spec:
      containers:
      - name: hostname
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: [serve-hostname]
        ports: [{containerPort: 9376}]
`)
	client := s.client(t)
	for _, pod := range runningPods(t, client, ns, "app=hostname", 2, 2*time.Minute) {
		var body string
		eventually(t, time.Minute, "pods/"+pod+"/proxy answers", func() (bool, string) {
			var err error
			body, err = proxyGet(context.Background(), client, ns, pod, "")
			if err != nil {
				return false, err.Error()
			}
			return body == pod, body
		})
	}
}

// TestAppsUpdateDemo runs the sig-cli Update Demo: a ReplicationController of
// the nautilus image serves /data.json naming nautilus.jpg through the pod
// proxy, kubectl scale takes it to 1 and back to 2, and the kitten image
// serves its own; the e2e suite's nginx runs too.
func TestAppsUpdateDemo(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	const rc = `apiVersion: v1
kind: ReplicationController
metadata: {name: update-demo-%[1]s}
spec:
  replicas: %[2]d
  selector: {name: update-demo, version: %[1]s}
  template:
    metadata:
      labels: {name: update-demo, version: %[1]s}
    spec:
      containers:
      - image: registry.k8s.io/e2e-test-images/%[1]s:1.8
        name: update-demo
        ports: [{containerPort: 80, protocol: TCP}]
`
	if out, errOut, err := s.kubectl(t, fmt.Sprintf(rc, "nautilus", 2), "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl create: %v\n%s%s", err, out, errOut)
	}
	c.apply(t, ns, fmt.Sprintf(rc, "kitten", 1))
	c.apply(t, ns, `apiVersion: v1
kind: Pod
metadata: {name: e2e-nginx, labels: {app: e2e-nginx}}
spec:
  containers:
  - {name: nginx, image: registry.k8s.io/e2e-test-images/nginx:1.27.0-2}
`)
	client := s.client(t)
	check := func(version string, n int) {
		t.Helper()
		for _, pod := range runningPods(t, client, ns, "name=update-demo,version="+version, n, 2*time.Minute) {
			eventually(t, time.Minute, pod+" serves data.json", func() (bool, string) {
				body, err := proxyGet(context.Background(), client, ns, pod, "data.json")
				if err != nil {
					return false, err.Error()
				}
				var data struct{ Image string }
				if err := json.Unmarshal([]byte(body), &data); err != nil {
					return false, body
				}
				return data.Image == version+".jpg", body
			})
			if body, err := proxyGet(context.Background(), client, ns, pod, version+".jpg"); err != nil || !strings.HasPrefix(body, "\xff\xd8") {
				t.Errorf("%s: %s.jpg is not a JPEG (%v): %q", pod, version, err, body[:min(len(body), 16)])
			}
		}
	}
	check("nautilus", 2)
	check("kitten", 1)
	s.must(t, "scale", "rc", "update-demo-nautilus", "-n", ns, "--replicas=1", "--timeout=2m")
	check("nautilus", 1)
	s.must(t, "scale", "rc", "update-demo-nautilus", "-n", ns, "--replicas=2", "--timeout=2m")
	check("nautilus", 2)
	runningPods(t, client, ns, "app=e2e-nginx", 1, 2*time.Minute)
}

// TestAppsStatefulSetScaleDownHalts: with every pod of an OrderedReady
// StatefulSet unready, scaling to 0 deletes none of them; once they are ready
// again the pods go highest first (the sig-apps spec 'Scaling should happen in
// predictable order and halt if any stateful pod is unhealthy').
func TestAppsStatefulSetScaleDownHalts(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ss}
spec:
  replicas: 3
  serviceName: ss
  selector: {matchLabels: {app: ss}}
  template:
    metadata: {labels: {app: ss}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: [test-webserver]
        readinessProbe:
          httpGet: {path: /localhost.crt, port: 80}
          periodSeconds: 1
          failureThreshold: 1
`)
	client := s.client(t)
	pods := []string{"ss-0", "ss-1", "ss-2"}
	readyCount := func() (int, int, string) {
		list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=ss"})
		if err != nil {
			return -1, -1, err.Error()
		}
		ready := 0
		var state []string
		for _, p := range list.Items {
			r := false
			for _, cond := range p.Status.Conditions {
				r = r || (cond.Type == v1.PodReady && cond.Status == v1.ConditionTrue)
			}
			if r {
				ready++
			}
			state = append(state, fmt.Sprintf("%s=%s/ready=%v", p.Name, p.Status.Phase, r))
		}
		return len(list.Items), ready, strings.Join(state, " ")
	}
	eventually(t, 3*time.Minute, "3 ready pods", func() (bool, string) {
		n, ready, state := readyCount()
		return n == 3 && ready == 3, state
	})
	for _, pod := range pods {
		s.must(t, "exec", "-n", ns, pod, "--", "mv", "/localhost.crt", "/tmp/")
	}
	eventually(t, time.Minute, "every pod unready", func() (bool, string) {
		n, ready, state := readyCount()
		return n == 3 && ready == 0, state
	})
	s.must(t, "scale", "statefulset", "ss", "-n", ns, "--replicas=0")
	// The controller has seen the new spec once observedGeneration follows it;
	// from then on, several of its syncs must leave the three pods alone.
	eventually(t, time.Minute, "status.observedGeneration 2", func() (bool, string) {
		out := s.must(t, "get", "statefulset", "ss", "-n", ns, "-o", "jsonpath={.status.observedGeneration}")
		return out == "2", out
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if n, _, state := readyCount(); n != 3 {
			t.Fatalf("scale-down went on with every pod unhealthy: %s", state)
		}
	}
	w, err := client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=ss"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Once ss-0 and ss-1 are ready again, ss-2 is the first unhealthy pod, which
	// Kubernetes' controller may delete as it is: on a slow machine it is stopping or
	// gone at the last exec, which then fails (the watch above sees it go, in order).
	for _, pod := range pods {
		_, errOut, err := s.kubectl(t, "", "exec", "-n", ns, pod, "--", "mv", "/tmp/localhost.crt", "/")
		if err != nil && pod != "ss-2" {
			t.Fatalf("kubectl exec -n %s %s -- mv /tmp/localhost.crt /: %v\n%s", ns, pod, err, errOut)
		}
	}
	var deleted []string
	timeout := time.After(2 * time.Minute)
	for len(deleted) < 3 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended; deleted so far %v", deleted)
			}
			if p, isPod := ev.Object.(*v1.Pod); isPod && ev.Type == watch.Deleted {
				deleted = append(deleted, p.Name)
			}
		case <-timeout:
			_, _, state := readyCount()
			t.Fatalf("pods not all deleted after their probes recovered: deleted %v, left %s", deleted, state)
		}
	}
	if want := []string{"ss-2", "ss-1", "ss-0"}; !slices.Equal(deleted, want) {
		t.Fatalf("deleted in the order %v, want %v", deleted, want)
	}
}

// TestAppsJobSuccessPolicy: an Indexed Job whose odd indexes fail completes
// by its successPolicy once index 0 succeeded, with the interim
// SuccessCriteriaMet first, no pod left running, and only index 0 completed
// (the sig-apps 'Job with successPolicy succeededIndexes rule' spec).
func TestAppsJobSuccessPolicy(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, `apiVersion: batch/v1
kind: Job
metadata: {name: policy}
spec:
  completionMode: Indexed
  completions: 5
  parallelism: 2
  successPolicy:
    rules: [{succeededIndexes: "0"}]
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        command: [sh, -c, 'if [ $((JOB_COMPLETION_INDEX % 2)) -ne 0 ]; then exit 1; fi']
`)
	const conds = `{range .status.conditions[*]}{.type}={.status}/{.reason}/{.message} {end}`
	var got string
	eventually(t, 2*time.Minute, "Complete by SuccessPolicy", func() (bool, string) {
		got = s.must(t, "get", "job", "policy", "-n", ns, "-o", "jsonpath="+conds)
		return strings.Contains(got, "Complete=True/SuccessPolicy/Matched rules at index 0"), got
	})
	if !strings.Contains(got, "SuccessCriteriaMet=True/SuccessPolicy/Matched rules at index 0") {
		t.Errorf("conditions %q lack the interim SuccessCriteriaMet", got)
	}
	job, err := s.client(t).BatchV1().Jobs(ns).Get(context.Background(), "policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := job.Status
	if st.CompletedIndexes != "0" || st.Succeeded != 1 || st.Active != 0 || st.Ready == nil || *st.Ready != 0 || st.Terminating == nil || *st.Terminating != 0 {
		t.Errorf("status %+v: want only index 0 completed and no pod active, ready or terminating", st)
	}
}

// TestAppsReplicationControllerQuotaFailure: a ReplicationController asking
// for more pods than its namespace's quota allows gets the ReplicaFailure
// condition (reason FailedCreate), which goes once it is scaled down to fit
// (the sig-apps spec 'ReplicationController should surface a failure
// condition on a common issue like exceeded quota').
func TestAppsReplicationControllerQuotaFailure(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, `apiVersion: v1
kind: ResourceQuota
metadata: {name: condition-test}
spec:
  hard: {pods: "2"}
`)
	eventually(t, time.Minute, "quota status.hard", func() (bool, string) {
		out := s.must(t, "get", "resourcequota", "condition-test", "-n", ns, "-o", "jsonpath={.status.hard.pods}")
		return out == "2", out
	})
	c.apply(t, ns, `apiVersion: v1
kind: ReplicationController
metadata: {name: condition-test}
spec:
  replicas: 3
  selector: {name: condition-test}
  template:
    metadata: {labels: {name: condition-test}}
    spec:
      containers:
      - {name: pause, image: registry.k8s.io/pause:3.10}
`)
	client := s.client(t)
	var cond string
	eventually(t, time.Minute, "ReplicaFailure condition", func() (bool, string) {
		rc, err := client.CoreV1().ReplicationControllers(ns).Get(context.Background(), "condition-test", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range rc.Status.Conditions {
			if c.Type == v1.ReplicationControllerReplicaFailure {
				cond = fmt.Sprintf("%s/%s/%s", c.Status, c.Reason, c.Message)
			}
		}
		return rc.Status.ObservedGeneration >= rc.Generation && cond != "", fmt.Sprintf("%+v", rc.Status)
	})
	if !strings.HasPrefix(cond, "True/FailedCreate/") || !strings.Contains(cond, "exceeded quota: condition-test") {
		t.Errorf("ReplicaFailure %q, want True/FailedCreate naming the quota", cond)
	}
	s.must(t, "scale", "rc", "condition-test", "-n", ns, "--replicas=2")
	eventually(t, time.Minute, "ReplicaFailure gone", func() (bool, string) {
		rc, err := client.CoreV1().ReplicationControllers(ns).Get(context.Background(), "condition-test", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range rc.Status.Conditions {
			if c.Type == v1.ReplicationControllerReplicaFailure {
				return false, fmt.Sprintf("%+v", rc.Status)
			}
		}
		return rc.Status.ObservedGeneration >= rc.Generation, fmt.Sprintf("%+v", rc.Status)
	})
}

// TestAppsDeleteJob: deleting a Job whose pods still run takes its pods away
// too: the garbage collector deletes them and the Job controller removes the
// tracking finalizer of the pods of a Job that is gone (the sig-apps spec
// 'Job should delete a job').
func TestAppsDeleteJob(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, `apiVersion: batch/v1
kind: Job
metadata: {name: foo}
spec:
  parallelism: 2
  completions: 4
  template:
    metadata: {labels: {job: foo}}
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: registry.k8s.io/pause:3.10}
`)
	client := s.client(t)
	runningPods(t, client, ns, "job=foo", 2, 2*time.Minute)
	s.must(t, "delete", "job", "foo", "-n", ns, "--wait=false")
	eventually(t, 2*time.Minute, "the job's pods gone", func() (bool, string) {
		pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job=foo"})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, p := range pods.Items {
			left = append(left, fmt.Sprintf("%s finalizers=%v deleting=%v", p.Name, p.Finalizers, p.DeletionTimestamp != nil))
		}
		return len(pods.Items) == 0, strings.Join(left, "; ")
	})
}

// TestAppsStatefulSetRecreatesRejectedPod: a StatefulSet pod bound to a node
// where another pod holds its host port is rejected by the node (Failed,
// NodePorts) and replaced by the StatefulSet controller until the port is
// free, then runs (the sig-apps spec 'Should recreate evicted statefulset').
func TestAppsStatefulSetRecreatesRejectedPod(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	node := strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"))[0]
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: test-pod}
spec:
  nodeName: %[1]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    ports: [{name: conflict, hostPort: 21017, containerPort: 21017}]
`, node)
	set := fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ss}
spec:
  replicas: 1
  serviceName: ss
  selector: {matchLabels: {app: ss}}
  template:
    metadata: {labels: {app: ss}}
    spec:
      nodeName: %[1]s
      terminationGracePeriodSeconds: 1
      containers:
      - name: agnhost
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        ports: [{name: conflict, hostPort: 21017, containerPort: 21017}]
`, node)
	c.apply(t, ns, pod)
	client := s.client(t)
	runningPods(t, client, ns, "", 1, 2*time.Minute)
	w, err := client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=ss"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c.apply(t, ns, set)
	var rejected *v1.Pod
	timeout := time.After(2 * time.Minute)
	for rejected == nil {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			if p, isPod := ev.Object.(*v1.Pod); isPod && p.Status.Phase == v1.PodFailed {
				rejected = p
			}
		case <-timeout:
			t.Fatal("ss-0 was never rejected")
		}
	}
	if rejected.Status.Reason != "NodePorts" || !strings.HasPrefix(rejected.Status.Message, "Pod was rejected: ") {
		t.Errorf("rejected ss-0's status: reason %q message %q", rejected.Status.Reason, rejected.Status.Message)
	}
	s.must(t, "delete", "pod", "test-pod", "-n", ns, "--grace-period=0", "--force")
	eventually(t, 2*time.Minute, "ss-0 running again as a new pod", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), "ss-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning && p.UID != rejected.UID, fmt.Sprintf("%s %s", p.UID, p.Status.Phase)
	})
}

// TestAppsReplicationControllerLifecycle follows the sig-apps spec
// 'ReplicationController should test the lifecycle of a
// ReplicationController' with client-go: the e2e suite's nginx becomes ready,
// then label, status and scale patches, a status update and a collection
// delete, each seen on one watch.
func TestAppsReplicationControllerLifecycle(t *testing.T) {
	c := up(t)
	ns := c.srv.namespace(t)
	client := c.srv.client(t)
	ctx := context.Background()
	rcs := client.CoreV1().ReplicationControllers(ns)
	sel := metav1.ListOptions{LabelSelector: "test-rc-static=true"}
	w, err := rcs.Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// next waits for the watch's next event matching cond.
	next := func(what string, cond func(watch.EventType, *v1.ReplicationController) bool) {
		t.Helper()
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch ended waiting for %s", what)
				}
				if rc, isRC := ev.Object.(*v1.ReplicationController); isRC && cond(ev.Type, rc) {
					return
				}
			case <-timeout:
				t.Fatalf("no watch event: %s", what)
			}
		}
	}
	one, two := int32(1), int32(2)
	labels := map[string]string{"test-rc-static": "true"}
	_, err = rcs.Create(ctx, &v1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "rc-test", Labels: labels},
		Spec: v1.ReplicationControllerSpec{Replicas: &one, Selector: labels, Template: &v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "rc-test", Image: "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"}}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next("ADDED", func(typ watch.EventType, _ *v1.ReplicationController) bool { return typ == watch.Added })
	ready := func(n int32) func(watch.EventType, *v1.ReplicationController) bool {
		return func(_ watch.EventType, rc *v1.ReplicationController) bool {
			return rc.Status.Replicas == n && rc.Status.ReadyReplicas == n
		}
	}
	next("1 ready replica", ready(1))
	patched, err := rcs.Patch(ctx, "rc-test", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"test-rc":"patched"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels["test-rc"] != "patched" {
		t.Fatalf("label patch: %v %v", err, patched)
	}
	next("MODIFIED by the label patch", func(typ watch.EventType, rc *v1.ReplicationController) bool {
		return typ == watch.Modified && rc.Labels["test-rc"] == "patched"
	})
	st, err := rcs.Patch(ctx, "rc-test", types.StrategicMergePatchType, []byte(`{"status":{"readyReplicas":0,"availableReplicas":0}}`), metav1.PatchOptions{}, "status")
	if err != nil || st.Status.ReadyReplicas != 0 {
		t.Fatalf("status patch: %v %+v", err, st)
	}
	scale, err := rcs.Patch(ctx, "rc-test", types.StrategicMergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}, "scale")
	if err != nil {
		t.Fatalf("scale patch: %v", err)
	}
	if got, err := rcs.GetScale(ctx, "rc-test", metav1.GetOptions{}); err != nil || got.Spec.Replicas != 2 {
		t.Fatalf("scale after the patch: %v %+v (patch answered %+v)", err, got, scale)
	}
	next("2 ready replicas", ready(two))
	cur, err := rcs.Get(ctx, "rc-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.AvailableReplicas, cur.Status.ReadyReplicas = 1, 1
	if _, err := rcs.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status update: %v", err)
	}
	next("MODIFIED by the status update", func(typ watch.EventType, _ *v1.ReplicationController) bool { return typ == watch.Modified })
	if err := rcs.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatalf("delete collection: %v", err)
	}
	next("DELETED", func(typ watch.EventType, _ *v1.ReplicationController) bool { return typ == watch.Deleted })
}
