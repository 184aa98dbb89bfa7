package localpv

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// fixture is a controller over a fake clientset whose informer caches are
// filled by hand from the clientset (load), so that every step is
// deterministic.
type fixture struct {
	c        *Controller
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
	root     string
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(10), root: t.TempDir()}
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	f.c = New(Config{Client: f.client, Informers: f.factory, PVRoot: f.root, Recorder: f.recorder})
	t.Cleanup(f.c.queue.ShutDown)
	f.load(t)
	return f
}

// load replaces the informer caches with what the clientset stores.
func (f *fixture) load(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pvcs, _ := f.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	pvs, _ := f.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	scs, _ := f.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	var claims, volumes, classes []interface{}
	for i := range pvcs.Items {
		claims = append(claims, &pvcs.Items[i])
	}
	for i := range pvs.Items {
		volumes = append(volumes, &pvs.Items[i])
	}
	for i := range scs.Items {
		classes = append(classes, &scs.Items[i])
	}
	must(t, f.factory.Core().V1().PersistentVolumeClaims().Informer().GetStore().Replace(claims, ""))
	must(t, f.factory.Core().V1().PersistentVolumes().Informer().GetStore().Replace(volumes, ""))
	must(t, f.factory.Storage().V1().StorageClasses().Informer().GetStore().Replace(classes, ""))
	f.client.ClearActions()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writes lists the fake client's writes as "verb resource[/sub] name".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		name := ""
		switch act := a.(type) {
		case clienttesting.CreateAction:
			name = act.GetObject().(metav1.Object).GetName()
		case clienttesting.UpdateAction:
			name = act.GetObject().(metav1.Object).GetName()
		case clienttesting.DeleteAction:
			name = act.GetName()
		case clienttesting.PatchAction:
			name = act.GetName()
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) claim(t *testing.T) *v1.PersistentVolumeClaim {
	t.Helper()
	c, err := f.client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "data", metav1.GetOptions{})
	must(t, err)
	return c
}

func TestEnsureStorageClass(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	must(t, EnsureStorageClass(ctx, client))
	must(t, EnsureStorageClass(ctx, client))
	sc, err := client.StorageV1().StorageClasses().Get(ctx, ClassName, metav1.GetOptions{})
	must(t, err)
	want := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "local", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "tranche.dev/local",
		ReclaimPolicy:     ptr.To(v1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	ignore := cmpopts.IgnoreFields(storagev1.StorageClass{}, "TypeMeta", "ManagedFields")
	if diff := cmp.Diff(want, sc, ignore); diff != "" {
		t.Errorf("class (-want +got):\n%s", diff)
	}
}

// TestProvisionBindDelete follows a claim without a class from creation
// to deletion: default class, provisioning, binding, then removal of the
// volume and its directory.
func TestProvisionBindDelete(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, makeClass(ClassName, Provisioner, asDefault), makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil }))
	dir := filepath.Join(f.root, "pvc-u1")

	must(t, f.c.sync(ctx, "claim:ns/data"))
	if diff := cmp.Diff([]string{"patch persistentvolumeclaims data"}, f.writes()); diff != "" {
		t.Fatalf("default class pass (-want +got):\n%s", diff)
	}
	if got := ptr.Deref(f.claim(t).Spec.StorageClassName, "<nil>"); got != ClassName {
		t.Fatalf("storageClassName %s, want local", got)
	}

	f.load(t)
	must(t, f.c.sync(ctx, "claim:ns/data"))
	want := []string{
		"create persistentvolumes pvc-u1",
		"update persistentvolumes/status pvc-u1",
		"update persistentvolumeclaims data",
		"update persistentvolumeclaims/status data",
	}
	if diff := cmp.Diff(want, f.writes()); diff != "" {
		t.Errorf("provision pass (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Normal ProvisioningSucceeded Successfully provisioned volume pvc-u1 using tranche.dev/local"}, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		t.Fatalf("volume directory: %v", err)
	}
	claim := f.claim(t)
	if claim.Spec.VolumeName != "pvc-u1" || claim.Status.Phase != v1.ClaimBound || claim.Status.Capacity.Storage().String() != "1Gi" ||
		claim.Annotations[annBindCompleted] != "yes" || claim.Annotations[annBoundByController] != "yes" || claim.Annotations[annStorageProvisioner] != Provisioner {
		t.Errorf("claim not bound: spec %+v status %+v annotations %v", claim.Spec, claim.Status, claim.Annotations)
	}
	pv, err := f.client.CoreV1().PersistentVolumes().Get(ctx, "pvc-u1", metav1.GetOptions{})
	must(t, err)
	if pv.Status.Phase != v1.VolumeBound {
		t.Errorf("volume phase %s, want Bound", pv.Status.Phase)
	}

	f.load(t)
	must(t, f.c.sync(ctx, "claim:ns/data"))
	must(t, f.c.sync(ctx, "volume:pvc-u1"))
	if w := f.writes(); len(w) != 0 {
		t.Errorf("steady state wrote %v", w)
	}

	must(t, os.WriteFile(filepath.Join(dir, "kept"), []byte("x"), 0o644))
	must(t, f.client.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data", metav1.DeleteOptions{}))
	f.load(t)
	must(t, f.c.sync(ctx, "claim:ns/data"))
	must(t, f.c.sync(ctx, "volume:pvc-u1"))
	if diff := cmp.Diff([]string{"delete persistentvolumes pvc-u1"}, f.writes()); diff != "" {
		t.Errorf("delete pass (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory still there: %v", err)
	}
}

func TestRetainReleases(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, makeClass(ClassName, Provisioner, func(sc *storagev1.StorageClass) {
		sc.ReclaimPolicy = ptr.To(v1.PersistentVolumeReclaimRetain)
	}), makeClaim(nil))
	must(t, f.c.sync(ctx, "claim:ns/data"))
	must(t, f.client.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data", metav1.DeleteOptions{}))
	f.load(t)
	must(t, f.c.sync(ctx, "volume:pvc-u1"))
	if diff := cmp.Diff([]string{"update persistentvolumes/status pvc-u1"}, f.writes()); diff != "" {
		t.Errorf("release pass (-want +got):\n%s", diff)
	}
	pv, err := f.client.CoreV1().PersistentVolumes().Get(ctx, "pvc-u1", metav1.GetOptions{})
	must(t, err)
	if pv.Status.Phase != v1.VolumeReleased {
		t.Errorf("phase %s, want Released", pv.Status.Phase)
	}
	if _, err := os.Stat(filepath.Join(f.root, "pvc-u1")); err != nil {
		t.Errorf("retained directory gone: %v", err)
	}
	f.load(t)
	must(t, f.c.sync(ctx, "volume:pvc-u1"))
	if w := f.writes(); len(w) != 0 {
		t.Errorf("second pass wrote %v", w)
	}
}

// TestStaleCacheKeepsVolume: a claim the cache misses but the API has
// must not lose its volume.
func TestStaleCacheKeepsVolume(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, makeClass(ClassName, Provisioner, nil), makeClaim(nil))
	must(t, f.c.sync(ctx, "claim:ns/data"))
	f.load(t)
	must(t, f.factory.Core().V1().PersistentVolumeClaims().Informer().GetStore().Replace(nil, ""))
	must(t, f.c.sync(ctx, "volume:pvc-u1"))
	if w := f.writes(); len(w) != 0 {
		t.Errorf("wrote %v", w)
	}
}
