package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// quotaPod is a pod for quota tests (it never runs on the node-less shared server).
func quotaPod(name string, requests, limits v1.ResourceList, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func rl(pairs ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// waitQuotaUsed waits until the quota's status.used holds want (other entries free)
// and status.hard equals spec.hard, as the conformance specs' waitForResourceQuota.
func waitQuotaUsed(t *testing.T, c kubernetes.Interface, ns, name string, want v1.ResourceList) {
	t.Helper()
	eventually(t, 60*time.Second, "quota "+name+" used "+fmt.Sprint(want), func() (bool, string) {
		q, err := c.CoreV1().ResourceQuotas(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for k, v := range want {
			got, ok := q.Status.Used[k]
			if !ok || got.Cmp(v) != 0 {
				return false, fmt.Sprintf("used %v hard %v", q.Status.Used, q.Status.Hard)
			}
		}
		if len(q.Status.Hard) != len(q.Spec.Hard) {
			return false, fmt.Sprintf("status.hard %v, spec.hard %v", q.Status.Hard, q.Spec.Hard)
		}
		return true, ""
	})
}

// forbidden checks err is a 403 with exactly msg as its message.
func forbidden(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || err.Error() != msg {
		t.Fatalf("%s: got %v, want 403 %q", what, err, msg)
	}
}

// TestResourceQuotaObjectCounts follows the conformance specs' "capture the life of" a
// configMap, secret, service, pod, replication controller and replica set: the
// controller computes status.used promptly, creates are charged, the one over the
// limit is refused with kube-apiserver's exact 403, deletes give usage back; resource
// quotas count themselves; kubectl prints the quota's table and describe.
func TestResourceQuotaObjectCounts(t *testing.T) {
	s := shared
	c := s.client(t)
	ctx := context.Background()
	ns := s.namespace(t)
	// The root CA publisher's config map is counted too; let it appear first.
	eventually(t, 30*time.Second, "kube-root-ca.crt", func() (bool, string) {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "test-quota"}, Spec: v1.ResourceQuotaSpec{Hard: rl(
		"pods", "5", "services", "10", "services.nodeports", "1", "services.loadbalancers", "1",
		"configmaps", "2", "secrets", "1", "replicationcontrollers", "1", "resourcequotas", "1",
		"count/replicasets.apps", "1", "persistentvolumeclaims", "1", "requests.storage", "5Gi",
		"cpu", "1", "memory", "500Mi", "requests.example.com/dongle", "3")}}
	if _, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, c, ns, "test-quota", rl("resourcequotas", "1", "configmaps", "1", "pods", "0", "services", "0", "secrets", "0", "cpu", "0"))

	t.Run("configmap", func(t *testing.T) {
		if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("configmaps", "2"))
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm2"}}, metav1.CreateOptions{})
		forbidden(t, "third config map", err, `configmaps "cm2" is forbidden: exceeded quota: test-quota, requested: configmaps=1, used: configmaps=2, limited: configmaps=2`)
		if err := c.CoreV1().ConfigMaps(ns).Delete(ctx, "cm1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("configmaps", "1"))
	})
	t.Run("secret", func(t *testing.T) {
		if _, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s2"}}, metav1.CreateOptions{})
		forbidden(t, "second secret", err, `secrets "s2" is forbidden: exceeded quota: test-quota, requested: secrets=1, used: secrets=1, limited: secrets=1`)
		waitQuotaUsed(t, c, ns, "test-quota", rl("secrets", "1"))
		if err := c.CoreV1().Secrets(ns).Delete(ctx, "s1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("secrets", "0"))
	})
	t.Run("service", func(t *testing.T) {
		svc := func(name string, typ v1.ServiceType) *v1.Service {
			return &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1.ServiceSpec{Type: typ, Ports: []v1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": name}}}
		}
		for _, s := range []*v1.Service{svc("plain", v1.ServiceTypeClusterIP), svc("np", v1.ServiceTypeNodePort)} {
			if _, err := c.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("services", "2", "services.nodeports", "1", "services.loadbalancers", "0"))
		_, err := c.CoreV1().Services(ns).Create(ctx, svc("np2", v1.ServiceTypeNodePort), metav1.CreateOptions{})
		forbidden(t, "second NodePort service", err, `services "np2" is forbidden: exceeded quota: test-quota, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1`)
		// Turning the ClusterIP service into a NodePort one is an update that changes usage.
		_, err = c.CoreV1().Services(ns).Patch(ctx, "plain", types.MergePatchType, []byte(`{"spec":{"type":"NodePort"}}`), metav1.PatchOptions{})
		forbidden(t, "type change to NodePort", err, `services "plain" is forbidden: exceeded quota: test-quota, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1`)
		for _, name := range []string{"plain", "np"} {
			if err := c.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("services", "0", "services.nodeports", "0"))
	})
	t.Run("pod", func(t *testing.T) {
		fits := quotaPod("test-pod", rl("cpu", "500m", "memory", "252Mi", "example.com/dongle", "2"), rl("example.com/dongle", "2"), nil)
		if _, err := c.CoreV1().Pods(ns).Create(ctx, fits, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("pods", "1", "cpu", "500m", "memory", "252Mi", "requests.example.com/dongle", "2"))
		_, err := c.CoreV1().Pods(ns).Create(ctx, quotaPod("fail-pod", rl("cpu", "600m", "memory", "100Mi"), nil, nil), metav1.CreateOptions{})
		forbidden(t, "pod over cpu", err, `pods "fail-pod" is forbidden: exceeded quota: test-quota, requested: cpu=600m, used: cpu=500m, limited: cpu=1`)
		_, err = c.CoreV1().Pods(ns).Create(ctx, quotaPod("fail-dongle", rl("cpu", "100m", "memory", "100Mi", "example.com/dongle", "2"), rl("example.com/dongle", "2"), nil), metav1.CreateOptions{})
		forbidden(t, "pod over the extended resource", err, `pods "fail-dongle" is forbidden: exceeded quota: test-quota, requested: requests.example.com/dongle=2, used: requests.example.com/dongle=2, limited: requests.example.com/dongle=3`)
		// A quota on cpu and memory needs them declared.
		_, err = c.CoreV1().Pods(ns).Create(ctx, quotaPod("no-requests", nil, nil, nil), metav1.CreateOptions{})
		forbidden(t, "pod without requests", err, `pods "no-requests" is forbidden: failed quota: test-quota: must specify cpu for: pause; memory for: pause`)
		// Dry runs are checked but not charged.
		if _, err := c.CoreV1().Pods(ns).Create(ctx, quotaPod("dry", rl("cpu", "100m", "memory", "1Mi"), nil, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		// A pod's resources cannot be updated in place through the pod itself; usage stays.
		cur, err := c.CoreV1().Pods(ns).Get(ctx, "test-pod", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Containers[0].Resources.Requests = rl("cpu", "100m", "memory", "100Mi")
		if _, err := c.CoreV1().Pods(ns).Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
			t.Fatal("a pod's resource requests were updated")
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("pods", "1", "cpu", "500m", "memory", "252Mi"))
		if err := c.CoreV1().Pods(ns).Delete(ctx, "test-pod", *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("pods", "0", "cpu", "0", "memory", "0", "requests.example.com/dongle", "0"))
	})
	t.Run("replication controller and replica set", func(t *testing.T) {
		zero := int32(0)
		rc := &v1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc1"}, Spec: v1.ReplicationControllerSpec{Replicas: &zero,
			Selector: map[string]string{"app": "rc"}, Template: &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rc"}},
				Spec: quotaPod("x", nil, nil, nil).Spec}}}
		if _, err := c.CoreV1().ReplicationControllers(ns).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rc.Name = "rc2"
		_, err := c.CoreV1().ReplicationControllers(ns).Create(ctx, rc, metav1.CreateOptions{})
		forbidden(t, "second rc", err, `replicationcontrollers "rc2" is forbidden: exceeded quota: test-quota, requested: replicationcontrollers=1, used: replicationcontrollers=1, limited: replicationcontrollers=1`)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs1"}, Spec: appsv1.ReplicaSetSpec{Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs"}}, Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rs"}}, Spec: quotaPod("x", nil, nil, nil).Spec}}}
		if _, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rs.Name = "rs2"
		_, err = c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
		forbidden(t, "second replica set", err, `replicasets.apps "rs2" is forbidden: exceeded quota: test-quota, requested: count/replicasets.apps=1, used: count/replicasets.apps=1, limited: count/replicasets.apps=1`)
		waitQuotaUsed(t, c, ns, "test-quota", rl("replicationcontrollers", "1", "count/replicasets.apps", "1"))
		if err := c.AppsV1().ReplicaSets(ns).Delete(ctx, "rs1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.CoreV1().ReplicationControllers(ns).Delete(ctx, "rc1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("replicationcontrollers", "0", "count/replicasets.apps", "0"))
	})
	t.Run("persistent volume claim", func(t *testing.T) {
		pvc := func(name, size string) *v1.PersistentVolumeClaim {
			return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeClaimSpec{
				AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, Resources: v1.VolumeResourceRequirements{Requests: rl("storage", size)}}}
		}
		_, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc("big", "10Gi"), metav1.CreateOptions{})
		forbidden(t, "claim over requests.storage", err, `persistentvolumeclaims "big" is forbidden: exceeded quota: test-quota, requested: requests.storage=10Gi, used: requests.storage=0, limited: requests.storage=5Gi`)
		if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc("small", "1Gi"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaUsed(t, c, ns, "test-quota", rl("persistentvolumeclaims", "1", "requests.storage", "1Gi"))
	})
	t.Run("resource quota", func(t *testing.T) {
		_, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "second"},
			Spec: v1.ResourceQuotaSpec{Hard: rl("pods", "1")}}, metav1.CreateOptions{})
		forbidden(t, "second quota", err, `resourcequotas "second" is forbidden: exceeded quota: test-quota, requested: resourcequotas=1, used: resourcequotas=1, limited: resourcequotas=1`)
	})
	t.Run("kubectl", func(t *testing.T) {
		out := s.must(t, "get", "quota", "-n", ns)
		if !regexp.MustCompile(`(?m)^NAME\s+REQUEST\s+LIMIT\s+AGE$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^test-quota\s+configmaps: 1/2, count/replicasets.apps: 0/1, cpu: 0/1, .*requests.storage: 1Gi/5Gi, .*services.nodeports: 0/1\s+\S+$`).MatchString(out) {
			t.Fatalf("kubectl get quota:\n%s", out)
		}
		out = s.must(t, "describe", "quota", "test-quota", "-n", ns)
		for _, line := range []string{`(?m)^Resource\s+Used\s+Hard$`, `(?m)^requests.storage\s+1Gi\s+5Gi$`, `(?m)^pods\s+0\s+5$`} {
			if !regexp.MustCompile(line).MatchString(out) {
				t.Fatalf("kubectl describe quota lacks %s:\n%s", line, out)
			}
		}
	})
}

// TestResourceQuotaScopes: BestEffort / NotBestEffort, Terminating / NotTerminating
// and a PriorityClass scope selector each count only the pods they match, and refuse
// the one over their limit.
func TestResourceQuotaScopes(t *testing.T) {
	s := shared
	c := s.client(t)
	ctx := context.Background()
	ns := s.namespace(t)
	scoped := func(name string, hard v1.ResourceList, mutate func(*v1.ResourceQuotaSpec)) {
		q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ResourceQuotaSpec{Hard: hard}}
		mutate(&q.Spec)
		if _, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scoped("best-effort", rl("pods", "1"), func(s *v1.ResourceQuotaSpec) { s.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort} })
	scoped("not-best-effort", rl("pods", "1", "requests.cpu", "1"), func(s *v1.ResourceQuotaSpec) {
		s.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotBestEffort}
	})
	scoped("terminating", rl("pods", "1"), func(s *v1.ResourceQuotaSpec) { s.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeTerminating} })
	scoped("high", rl("pods", "0"), func(s *v1.ResourceQuotaSpec) {
		s.ScopeSelector = &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{{
			ScopeName: v1.ResourceQuotaScopePriorityClass, Operator: v1.ScopeSelectorOpIn, Values: []string{"e2e-high"}}}}
	})
	for _, name := range []string{"best-effort", "not-best-effort", "terminating", "high"} {
		waitQuotaUsed(t, c, ns, name, rl("pods", "0"))
	}

	// The class must exist: the Priority admission refuses a pod naming a missing one.
	s.must(t, "create", "priorityclass", "e2e-high", "--value=1000")
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "priorityclass", "e2e-high") })
	_, err := c.CoreV1().Pods(ns).Create(ctx, quotaPod("prio", nil, nil, func(p *v1.Pod) { p.Spec.PriorityClassName = "e2e-high" }), metav1.CreateOptions{})
	forbidden(t, "pod of priority class e2e-high", err, `pods "prio" is forbidden: exceeded quota: high, requested: pods=1, used: pods=0, limited: pods=0`)

	if _, err := c.CoreV1().Pods(ns).Create(ctx, quotaPod("be", nil, nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, c, ns, "best-effort", rl("pods", "1"))
	waitQuotaUsed(t, c, ns, "not-best-effort", rl("pods", "0"))
	_, err = c.CoreV1().Pods(ns).Create(ctx, quotaPod("be2", nil, nil, nil), metav1.CreateOptions{})
	forbidden(t, "second best-effort pod", err, `pods "be2" is forbidden: exceeded quota: best-effort, requested: pods=1, used: pods=1, limited: pods=1`)

	if _, err := c.CoreV1().Pods(ns).Create(ctx, quotaPod("burstable", rl("cpu", "100m"), nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, c, ns, "not-best-effort", rl("pods", "1", "requests.cpu", "100m"))
	waitQuotaUsed(t, c, ns, "best-effort", rl("pods", "1"))

	deadline := int64(3600)
	_, err = c.CoreV1().Pods(ns).Create(ctx, quotaPod("terminating", rl("cpu", "100m"), nil, func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = &deadline }), metav1.CreateOptions{})
	forbidden(t, "terminating burstable pod", err, `pods "terminating" is forbidden: exceeded quota: not-best-effort, requested: pods=1, used: pods=1, limited: pods=1`)

	if err := c.CoreV1().Pods(ns).Delete(ctx, "be", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, c, ns, "best-effort", rl("pods", "0"))
}

// TestResourceQuotaRace: creates racing for the last units of a quota never exceed
// it, because each charge is a compare-and-swap of the quota's status.
func TestResourceQuotaRace(t *testing.T) {
	s := shared
	c := s.client(t)
	ctx := context.Background()
	ns := s.namespace(t)
	if _, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "three"},
		Spec: v1.ResourceQuotaSpec{Hard: rl("count/secrets", "3")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, c, ns, "three", rl("count/secrets", "0"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := range 12 {
		wg.Go(func() {
			_, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}}, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case apierrors.IsForbidden(err):
				refused++
			default:
				t.Errorf("secret s%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if created != 3 || refused != 9 {
		t.Fatalf("created %d, refused %d; want 3 and 9", created, refused)
	}
	list, err := c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d secrets stored, want 3", len(list.Items))
	}
	waitQuotaUsed(t, c, ns, "three", rl("count/secrets", "3"))
}

// TestResourceQuotaLifecycle follows "should be able to update and delete", "should
// manage the lifecycle" and "should apply changes to a resourcequota status": patch
// and update spec.hard (status.hard follows), scopes are immutable, status writes
// through the subresource only, list by label, deletecollection; view reads quotas and
// limit ranges, edit and admin cannot write quotas.
func TestResourceQuotaLifecycle(t *testing.T) {
	s := shared
	c := s.client(t)
	ctx := context.Background()
	ns := s.namespace(t)
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "life", Labels: map[string]string{"e2e": "life"}},
		Spec: v1.ResourceQuotaSpec{Hard: rl("cpu", "1", "memory", "500Mi")}}
	if _, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaUsed(t, c, ns, "life", rl("cpu", "0"))
	s.must(t, "patch", "quota", "life", "-n", ns, "--type=strategic", "-p", `{"spec":{"hard":{"cpu":"2","memory":"1Gi"}}}`)
	eventually(t, 30*time.Second, "status.hard follows the patch", func() (bool, string) {
		got := s.must(t, "get", "quota", "life", "-n", ns, "-o", "jsonpath={.status.hard.cpu} {.status.hard.memory}")
		return got == "2 1Gi", got
	})
	// The quota controller may write the status between a read and an update: as
	// kube-apiserver, a stale resourceVersion is a conflict before the update is
	// validated, so each update is made again on what is stored.
	var upd *v1.ResourceQuota
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, "life", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Hard[v1.ResourceCPU] = resource.MustParse("3")
		cur.Status.Hard = rl("cpu", "99")
		upd, err = c.CoreV1().ResourceQuotas(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := upd.Spec.Hard[v1.ResourceCPU]; got.String() != "3" || upd.Status.Hard.Cpu().String() == "99" {
		t.Fatalf("update: spec.hard.cpu %s status.hard.cpu %s; want the spec written and status kept", got.String(), upd.Status.Hard.Cpu().String())
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, "life", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}
		cur.Spec.Hard = rl("pods", "1")
		_, err = c.CoreV1().ResourceQuotas(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec.scopes: Invalid value: ["BestEffort"]: field is immutable`) {
		t.Fatalf("changing scopes: %v", err)
	}
	// A status patch is taken; the controller puts hard back from spec on its next sync.
	s.must(t, "patch", "quota", "life", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"hard":{"cpu":"7"}}}`)
	if got := s.must(t, "get", "quota", "life", "-n", ns, "-o", "jsonpath={.spec.hard.cpu}"); got != "3" {
		t.Fatalf("status patch changed spec.hard.cpu to %s", got)
	}
	_, errOut, err := s.kubectl(t, "", "create", "quota", "bad", "-n", ns, "--hard=pods=-1")
	if err == nil || !strings.Contains(errOut, `spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0`) {
		t.Fatalf("negative hard: %v\n%s", err, errOut)
	}
	if out := s.must(t, "get", "quota", "-A", "-l", "e2e=life", "-o", "name"); strings.TrimSpace(out) != "resourcequota/life" {
		t.Fatalf("list by label: %q", out)
	}

	s.must(t, "create", "serviceaccount", "viewer", "-n", ns)
	s.must(t, "create", "serviceaccount", "editor", "-n", ns)
	s.must(t, "create", "rolebinding", "viewer", "-n", ns, "--clusterrole=view", "--serviceaccount="+ns+":viewer")
	s.must(t, "create", "rolebinding", "editor", "-n", ns, "--clusterrole=admin", "--serviceaccount="+ns+":editor")
	viewer, editor := tokenKubeconfig(t, s, ns, "viewer"), tokenKubeconfig(t, s, ns, "editor")
	eventually(t, 30*time.Second, "view reads quotas and limit ranges", func() (bool, string) {
		out, errOut, err := viewer.kubectl(t, "", "get", "quota,limits", "-n", ns, "-o", "name")
		return err == nil && strings.Contains(out, "resourcequota/life"), out + errOut
	})
	for _, who := range []*server{viewer, editor} {
		_, errOut, err := who.kubectl(t, "", "create", "quota", "mine", "-n", ns, "--hard=pods=1")
		if err == nil || !strings.Contains(errOut, `resourcequotas is forbidden`) {
			t.Fatalf("quota create by a namespace role: %v\n%s", err, errOut)
		}
	}

	s.must(t, "delete", "quota", "--all", "-n", ns)
	if out := s.must(t, "get", "quota", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("quotas left after deletecollection: %q", out)
	}
}

// TestLimitRangeDefaultsAndBounds follows "should create a LimitRange with defaults
// and ensure pod has those defaults applied" and "should list, patch and delete a
// LimitRange by collection": the LimitRange is stored with core/v1's defaults, a pod
// without resources gets the default requests and limits, a partial one keeps its own,
// pods and claims outside min/max are refused with kube-apiserver's messages, and
// kubectl describes the limits.
func TestLimitRangeDefaultsAndBounds(t *testing.T) {
	s := shared
	c := s.client(t)
	ctx := context.Background()
	ns := s.namespace(t)
	lr := &v1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Labels: map[string]string{"e2e": "limits"}}, Spec: v1.LimitRangeSpec{Limits: []v1.LimitRangeItem{
		{Type: v1.LimitTypeContainer, Min: rl("cpu", "100m", "memory", "100Mi", "ephemeral-storage", "150Gi"),
			Max:                  rl("cpu", "500m", "memory", "500Mi", "ephemeral-storage", "500Gi"),
			DefaultRequest:       rl("cpu", "200m", "memory", "200Mi", "ephemeral-storage", "200Gi"),
			Default:              rl("cpu", "300m", "memory", "300Mi", "ephemeral-storage", "300Gi"),
			MaxLimitRequestRatio: rl("cpu", "4")},
		{Type: v1.LimitTypePersistentVolumeClaim, Min: rl("storage", "1Gi"), Max: rl("storage", "2Gi")},
	}}}
	if _, err := c.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Container item without defaults gets them from max and min.
	bare := `{"apiVersion":"v1","kind":"LimitRange","metadata":{"name":"bare"},"spec":{"limits":[{"type":"Container","max":{"memory":"1Gi"},"min":{"cpu":"10m"}}]}}`
	if _, errOut, err := s.kubectl(t, bare, "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("create bare limit range: %v\n%s", err, errOut)
	}
	if got := s.must(t, "get", "limits", "bare", "-n", ns, "-o", "jsonpath={.spec.limits[0].default.memory} {.spec.limits[0].defaultRequest.memory} {.spec.limits[0].defaultRequest.cpu}"); got != "1Gi 1Gi 10m" {
		t.Fatalf("bare limit range defaults: %q, want default and defaultRequest memory from max, defaultRequest cpu from min", got)
	}
	s.must(t, "delete", "limits", "bare", "-n", ns)

	pod, err := c.CoreV1().Pods(ns).Create(ctx, quotaPod("pod-no-resources", nil, nil, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := pod.Spec.Containers[0].Resources
	if got := fmt.Sprint(res.Requests.Cpu(), res.Requests.Memory(), res.Limits.Cpu(), res.Limits.Memory(), res.Requests.StorageEphemeral()); got != "200m 200Mi 300m 300Mi 200Gi" {
		t.Fatalf("defaulted pod resources: %s", got)
	}
	if pod.Annotations["kubernetes.io/limit-ranger"] == "" {
		t.Errorf("no kubernetes.io/limit-ranger annotation: %v", pod.Annotations)
	}
	// A limit without a request defaults the request to the limit, not to defaultRequest.
	pod, err = c.CoreV1().Pods(ns).Create(ctx, quotaPod("pod-partial", rl("memory", "150Mi", "ephemeral-storage", "150Gi"), rl("cpu", "300m"), nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res = pod.Spec.Containers[0].Resources
	if got := fmt.Sprint(res.Requests.Cpu(), res.Requests.Memory(), res.Limits.Cpu(), res.Limits.Memory()); got != "300m 150Mi 300m 300Mi" {
		t.Fatalf("partially defaulted pod resources: %s", got)
	}
	_, err = c.CoreV1().Pods(ns).Create(ctx, quotaPod("pod-small", rl("cpu", "50m", "memory", "150Mi"), rl("cpu", "50m", "memory", "150Mi"), nil), metav1.CreateOptions{})
	forbidden(t, "pod under min", err, `pods "pod-small" is forbidden: minimum cpu usage per Container is 100m, but request is 50m`)
	_, err = c.CoreV1().Pods(ns).Create(ctx, quotaPod("pod-big", rl("cpu", "100m", "memory", "150Mi"), rl("cpu", "600m", "memory", "150Mi"), nil), metav1.CreateOptions{})
	forbidden(t, "pod over max", err, `pods "pod-big" is forbidden: [maximum cpu usage per Container is 500m, but limit is 600m, cpu max limit to request ratio per Container is 4, but provided ratio is 6.000000]`)
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-big"}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, Resources: v1.VolumeResourceRequirements{Requests: rl("storage", "3Gi")}}}
	_, err = c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	forbidden(t, "claim over max", err, `persistentvolumeclaims "claim-big" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 3Gi`)

	out := s.must(t, "describe", "limits", "limits", "-n", ns)
	for _, line := range []string{
		`(?m)^Type\s+Resource\s+Min\s+Max\s+Default Request\s+Default Limit\s+Max Limit/Request Ratio$`,
		`(?m)^Container\s+cpu\s+100m\s+500m\s+200m\s+300m\s+4$`,
		`(?m)^PersistentVolumeClaim\s+storage\s+1Gi\s+2Gi\s+-\s+-\s+-$`,
	} {
		if !regexp.MustCompile(line).MatchString(out) {
			t.Fatalf("kubectl describe limits lacks %s:\n%s", line, out)
		}
	}
	if out := s.must(t, "get", "limits", "-n", ns); !regexp.MustCompile(`(?m)^NAME\s+CREATED AT$`).MatchString(out) || !strings.Contains(out, "limits ") {
		t.Fatalf("kubectl get limits:\n%s", out)
	}
	// After the defaults change, new pods get the new ones.
	s.must(t, "patch", "limits", "limits", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/limits/0/defaultRequest/cpu","value":"250m"}]`)
	eventually(t, 30*time.Second, "new default request applied", func() (bool, string) {
		name := fmt.Sprintf("pod-after-%d", time.Now().UnixNano())
		p, err := c.CoreV1().Pods(ns).Create(ctx, quotaPod(name, nil, nil, nil), metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := p.Spec.Containers[0].Resources.Requests.Cpu().String()
		return got == "250m", got
	})
	if out := s.must(t, "get", "limits", "-A", "-l", "e2e=limits", "-o", "name"); strings.TrimSpace(out) != "limitrange/limits" {
		t.Fatalf("list by label: %q", out)
	}
	s.must(t, "delete", "limits", "-n", ns, "-l", "e2e=limits")
	if out := s.must(t, "get", "limits", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("limit ranges left after deletecollection: %q", out)
	}
}
