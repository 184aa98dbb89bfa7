package volumes

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func makePod(mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "say \"hi\""},
		},
		Spec: v1.PodSpec{
			NodeName:   "node-a",
			Containers: []v1.Container{{Name: "c"}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func withVolume(v v1.Volume) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v) }
}

func makeConfigMap(name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data}
}

// fixture is a Manager over a fake clientset, a fake clock and temporary
// directories.
type fixture struct {
	m      *Manager
	client *fake.Clientset
	clock  *testingclock.FakeClock
	root   string
	pvRoot string
	tokens int
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	tmp := t.TempDir()
	f := &fixture{
		client: fake.NewClientset(objs...),
		clock:  testingclock.NewFakeClock(t0),
		root:   filepath.Join(tmp, "root"),
		pvRoot: filepath.Join(tmp, "pv"),
	}
	// The fake tracker cannot store TokenRequests: answer them as the API
	// server would, with a numbered token valid for the requested time.
	f.client.PrependReactor("create", "serviceaccounts", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(clienttesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		req := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		f.tokens++
		req.Status = authenticationv1.TokenRequestStatus{
			Token:               "token-" + string(rune('0'+f.tokens)) + "-" + strings.Join(req.Spec.Audiences, ","),
			ExpirationTimestamp: metav1.NewTime(f.clock.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)),
		}
		return true, req, nil
	})
	f.m = New(Config{Client: f.client, RootDir: f.root, PVRoot: f.pvRoot, NodeName: "node-a", Clock: f.clock})
	return f
}

func TestPrepareContentVolumes(t *testing.T) {
	cm := makeConfigMap("cfg", map[string]string{"a.conf": "A", "b.conf": "B"})
	cm.BinaryData = map[string][]byte{"bin": {0, 1}}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"user": []byte("u"), "pass": []byte("p")}}
	cases := []struct {
		name string
		vol  v1.Volume
		want map[string]string
	}{
		{
			name: "configMap all keys with default mode",
			vol:  v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
			want: map[string]string{"a.conf": "-rw-r--r-- A", "b.conf": "-rw-r--r-- B", "bin": "-rw-r--r-- \x00\x01"},
		},
		{
			name: "configMap items with paths, item mode and defaultMode",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
				DefaultMode:          ptr.To[int32](0o600),
				Items: []v1.KeyToPath{
					{Key: "a.conf", Path: "conf/a"},
					{Key: "b.conf", Path: "b", Mode: ptr.To[int32](0o755)},
				},
			}}},
			want: map[string]string{"conf/a": "-rw------- A", "b": "-rwxr-xr-x B"},
		},
		{
			name: "optional configMap that is missing is empty",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true),
			}}},
			want: map[string]string{},
		},
		{
			name: "optional configMap skips a missing key",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Optional: ptr.To(true),
				Items: []v1.KeyToPath{{Key: "a.conf", Path: "a"}, {Key: "zzz", Path: "z"}},
			}}},
			want: map[string]string{"a": "-rw-r--r-- A"},
		},
		{
			name: "secret items",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
				SecretName: "creds", Items: []v1.KeyToPath{{Key: "pass", Path: "password", Mode: ptr.To[int32](0o400)}},
			}}},
			want: map[string]string{"password": "-r-------- p"},
		},
		{
			name: "downwardAPI fields",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "annotations", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
				{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				{Path: "ns", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
				{Path: "uid", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}},
				{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
				{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "requests.cpu", Divisor: resource.MustParse("1m")}},
				{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
			}}}},
			want: map[string]string{
				"labels":      "-rw-r--r-- app=\"web\"\ntier=\"front\"",
				"annotations": "-rw-r--r-- note=\"say \\\"hi\\\"\"",
				"name":        "-rw-r--r-- web", "ns": "-rw-r--r-- ns", "uid": "-rw-r--r-- uid-1",
				"app": "-rw-r--r-- web", "cpu": "-rw-r--r-- 250", "mem": "-rw-r--r-- 64",
			},
		},
		{
			name: "projected merges sources",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o440),
				Sources: []v1.VolumeProjection{
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "a.conf", Path: "a"}}}},
					{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Items: []v1.KeyToPath{{Key: "user", Path: "user"}}}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}},
				},
			}}},
			want: map[string]string{"a": "-r--r----- A", "user": "-r--r----- u", "name": "-r--r----- web", "token": "-r--r----- token-1-vault"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, cm, secret)
			pod := makePod(withVolume(tc.vol))
			pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
			}
			paths, err := f.m.Prepare(context.Background(), pod)
			if err != nil {
				t.Fatal(err)
			}
			dir := paths["v"]
			if !strings.HasPrefix(dir, filepath.Join(f.root, "pods", "uid-1", "volumes", "kubernetes.io~")) {
				t.Errorf("volume dir %s is not under the pod's volumes", dir)
			}
			if diff := cmp.Diff(tc.want, readVolume(t, dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareFailures(t *testing.T) {
	cm := makeConfigMap("cfg", map[string]string{"a": "A"})
	cases := []struct {
		name     string
		vol      v1.Volume
		want     string
		notFound bool
	}{
		{
			name:     "missing configMap",
			vol:      v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}}},
			want:     `MountVolume.SetUp failed for volume "v" : configmap "x" not found`,
			notFound: true,
		},
		{
			name:     "missing secret",
			vol:      v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}},
			want:     `MountVolume.SetUp failed for volume "v" : secret "x" not found`,
			notFound: true,
		},
		{
			name: "missing configMap key",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "zzz", Path: "z"}},
			}}},
			want: `MountVolume.SetUp failed for volume "v" : configmap references non-existent config key: zzz`,
		},
		{
			name:     "projected with missing configMap",
			vol:      v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}},
			want:     `MountVolume.SetUp failed for volume "v" : configmap "kube-root-ca.crt" not found`,
			notFound: true,
		},
		{
			name: "unknown downward field",
			vol: v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}},
			}}}},
			want: `MountVolume.SetUp failed for volume "v" : unsupported fieldPath: spec.nodeName`,
		},
		{
			name: "hostPath Directory missing",
			vol:  v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/nonexistent/tranche", Type: ptr.To(v1.HostPathDirectory)}}},
			want: `MountVolume.SetUp failed for volume "v" : hostPath type check failed: /nonexistent/tranche is not a directory`,
		},
		{
			name: "unsupported kind",
			vol:  v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}},
			want: `MountVolume.SetUp failed for volume "v" : volume type not supported by tranche: use emptyDir, hostPath, configMap, secret, downwardAPI, projected, persistentVolumeClaim or image`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, cm)
			ok := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
			paths, err := f.m.Prepare(context.Background(), makePod(func(p *v1.Pod) { p.Spec.Volumes = []v1.Volume{ok, tc.vol} }))
			var me *MountError
			if !errors.As(err, &me) {
				t.Fatalf("error %v is not a *MountError", err)
			}
			if me.Error() != tc.want {
				t.Errorf("message\n got %s\nwant %s", me.Error(), tc.want)
			}
			if me.Reason() != "FailedMount" || me.Volume != "v" {
				t.Errorf("reason %s volume %s", me.Reason(), me.Volume)
			}
			if apierrors.IsNotFound(err) != tc.notFound {
				t.Errorf("IsNotFound = %v, want %v", apierrors.IsNotFound(err), tc.notFound)
			}
			if _, ok := paths["scratch"]; !ok || len(paths) != 1 {
				t.Errorf("ready volumes = %v, want only scratch", paths)
			}
		})
	}
}

func TestHostPathTypes(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "dir")
	file := filepath.Join(tmp, "file")
	sock := filepath.Join(tmp, "sock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cases := []struct {
		path    string
		typ     v1.HostPathType
		wantErr string
	}{
		{dir, v1.HostPathUnset, ""},
		{filepath.Join(tmp, "anything"), v1.HostPathUnset, ""},
		{dir, v1.HostPathDirectory, ""},
		{file, v1.HostPathDirectory, "hostPath type check failed: " + file + " is not a directory"},
		{filepath.Join(tmp, "new/deep"), v1.HostPathDirectoryOrCreate, ""},
		{file, v1.HostPathDirectoryOrCreate, "hostPath type check failed: " + file + " is not a directory"},
		{file, v1.HostPathFile, ""},
		{dir, v1.HostPathFile, "hostPath type check failed: " + dir + " is not a file"},
		{filepath.Join(tmp, "newfile"), v1.HostPathFileOrCreate, ""},
		{sock, v1.HostPathSocket, ""},
		{file, v1.HostPathSocket, "hostPath type check failed: " + file + " is not a socket file"},
		{"/dev/null", v1.HostPathCharDev, ""},
		{file, v1.HostPathCharDev, "hostPath type check failed: " + file + " is not a character device"},
		{"/dev/null", v1.HostPathBlockDev, "hostPath type check failed: /dev/null is not a block device"},
		{dir, "Weird", "Weird is an invalid volume type"},
	}
	for _, tc := range cases {
		t.Run(string(tc.typ)+" "+filepath.Base(tc.path), func(t *testing.T) {
			err := checkHostPath(tc.path, &tc.typ)
			if got := errString(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && got != tc.wantErr) {
				t.Fatalf("error %q, want %q", got, tc.wantErr)
			}
			if tc.wantErr == "" && tc.typ != v1.HostPathUnset {
				if _, err := os.Stat(tc.path); err != nil {
					t.Errorf("path not there afterwards: %v", err)
				}
			}
		})
	}
}

// fakeMounter records tmpfs mounts instead of making them.
type fakeMounter struct{ mounts map[string]string }

var _ Mounter = (*fakeMounter)(nil)

func (f *fakeMounter) MountTmpfs(dir, data string) error {
	if _, ok := f.mounts[dir]; ok {
		return errors.New("already mounted: " + dir)
	}
	f.mounts[dir] = data
	return nil
}

func (f *fakeMounter) IsTmpfs(dir string) (bool, error) {
	_, ok := f.mounts[dir]
	return ok, nil
}

func (f *fakeMounter) Unmount(dir string) error {
	delete(f.mounts, dir)
	return nil
}

func TestEmptyDir(t *testing.T) {
	f := newFixture(t)
	mounter := &fakeMounter{mounts: map[string]string{}}
	f.m.mounter = mounter
	limit := resource.MustParse("64Mi")
	pod := makePod(func(p *v1.Pod) {
		withVolume(v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})(p)
		withVolume(v1.Volume{Name: "small", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}})(p)
		withVolume(v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})(p)
	})
	paths, err := f.m.Prepare(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(f.root, "pods/uid-1/volumes/kubernetes.io~empty-dir/cache")
	if paths["cache"] != want {
		t.Fatalf("path %s, want %s", paths["cache"], want)
	}
	wantMounts := map[string]string{want: "", paths["small"]: "size=67108864"}
	if diff := cmp.Diff(wantMounts, mounter.mounts); diff != "" {
		t.Errorf("tmpfs mounts (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(filepath.Join(want, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(want, "data")); err != nil {
		t.Errorf("second Prepare lost emptyDir data: %v", err)
	}
	if len(mounter.mounts) != 2 {
		t.Errorf("second Prepare: mounts %v, want the same two", mounter.mounts)
	}
	if err := f.m.Cleanup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(mounter.mounts) != 0 {
		t.Errorf("Cleanup left tmpfs mounts %v", mounter.mounts)
	}
	if _, err := os.Stat(filepath.Join(f.root, "pods/uid-1/volumes")); !os.IsNotExist(err) {
		t.Errorf("volumes dir still there after Cleanup: %v", err)
	}
}

// TestEmptyDirTmpfs mounts a real tmpfs for medium Memory, world-writable, and
// Cleanup unmounts and removes it.
func TestEmptyDirTmpfs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	f := newFixture(t)
	pod := makePod(withVolume(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}))
	paths, err := f.m.Prepare(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["mem"]
	t.Cleanup(func() { _ = HostMounter{}.Unmount(dir) })
	if ok, err := (HostMounter{}).IsTmpfs(dir); !ok || err != nil {
		t.Fatalf("%s is not a tmpfs mount point (%v)", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("mode of %s: %v (%v), want 0777", dir, fi.Mode(), err)
	}
	if _, err := f.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Cleanup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Cleanup: %v", dir, err)
	}
}

func TestRefreshFollowsConfigMap(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, makeConfigMap("cfg", map[string]string{"k": "one"}))
	pod := makePod(withVolume(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}))
	paths, err := f.m.Prepare(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().ConfigMaps("ns").Update(ctx, makeConfigMap("cfg", map[string]string{"k": "two", "n": "new"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"k": "-rw-r--r-- two", "n": "-rw-r--r-- new"}, readVolume(t, paths["v"])); diff != "" {
		t.Errorf("after refresh (-want +got):\n%s", diff)
	}
	if err := f.m.Cleanup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if err := f.m.Refresh(ctx); err != nil || len(f.client.Actions()) != 0 {
		t.Errorf("Refresh after Cleanup: err %v, actions %v", err, f.client.Actions())
	}
}

// TestTokenRefresh checks that a projected token is requested once, bound
// to the pod, reused until 80% of its lifetime and then renewed.
func TestTokenRefresh(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	pod := makePod(func(p *v1.Pod) {
		p.Spec.ServiceAccountName = "robot"
		p.Spec.Volumes = []v1.Volume{{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "api", ExpirationSeconds: ptr.To[int64](1000)}},
		}}}}}
	})
	paths, err := f.m.Prepare(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(paths["tok"], "token")
	steps := []struct {
		at        time.Duration
		wantToken string
		wantReqs  int
	}{
		{0, "token-1-api", 1},
		{500 * time.Second, "token-1-api", 1},
		{799 * time.Second, "token-1-api", 1},
		{800 * time.Second, "token-2-api", 2},
		{1500 * time.Second, "token-2-api", 2},
		{1600 * time.Second, "token-3-api", 3},
	}
	for _, s := range steps {
		f.clock.SetTime(t0.Add(s.at))
		if err := f.m.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(tokenFile)
		if string(got) != s.wantToken || f.tokens != s.wantReqs {
			t.Errorf("at +%v: token %q after %d requests, want %q after %d", s.at, got, f.tokens, s.wantToken, s.wantReqs)
		}
	}
	var req *authenticationv1.TokenRequest
	for _, a := range f.client.Actions() {
		if a.GetSubresource() == "token" {
			req = a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
			if ca := a.(clienttesting.CreateAction); ca.GetNamespace() != "ns" || a.(clienttesting.CreateActionImpl).Name != "robot" {
				t.Errorf("token requested for %s/%s, want ns/robot", ca.GetNamespace(), a.(clienttesting.CreateActionImpl).Name)
			}
		}
	}
	want := authenticationv1.TokenRequestSpec{
		Audiences:         []string{"api"},
		ExpirationSeconds: ptr.To[int64](1000),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-1"},
	}
	if req == nil {
		t.Fatal("no token request")
	}
	if diff := cmp.Diff(want, req.Spec); diff != "" {
		t.Errorf("token request (-want +got):\n%s", diff)
	}
}

func TestNeedsRefresh(t *testing.T) {
	tr := func(issued time.Time, seconds int64) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{
			Spec:   authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(seconds)},
			Status: authenticationv1.TokenRequestStatus{ExpirationTimestamp: metav1.NewTime(issued.Add(time.Duration(seconds) * time.Second))},
		}
	}
	cases := []struct {
		name string
		tr   *authenticationv1.TokenRequest
		now  time.Time
		want bool
	}{
		{"fresh", tr(t0, 3607), t0.Add(time.Hour / 2), false},
		{"just before 80%", tr(t0, 1000), t0.Add(799 * time.Second), false},
		{"at 80%", tr(t0, 1000), t0.Add(800 * time.Second), true},
		{"expired", tr(t0, 1000), t0.Add(2000 * time.Second), true},
		{"long-lived token older than a day", tr(t0, 7*24*3600), t0.Add(25 * time.Hour), true},
		{"no expiration seconds", &authenticationv1.TokenRequest{}, t0, true},
		{"nil", nil, t0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsRefresh(tc.tr, tc.now); got != tc.want {
				t.Errorf("needsRefresh = %v, want %v", got, tc.want)
			}
		})
	}
}

func makePVC(mutate func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "claim-uid"},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: "pvc-claim-uid"},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func makePV(mutate func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-claim-uid", Annotations: map[string]string{annProvisionedBy: LocalProvisioner}},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/elsewhere/pvc-claim-uid"}},
			ClaimRef:               &v1.ObjectReference{Namespace: "ns", Name: "data", UID: "claim-uid"},
		},
	}
	if mutate != nil {
		mutate(pv)
	}
	return pv
}

func TestPersistentVolumeClaim(t *testing.T) {
	hostDir := t.TempDir()
	cases := []struct {
		name    string
		objs    []runtime.Object
		want    string // path relative to the PV root, or absolute
		wantErr string
	}{
		{name: "local PV lives under PVRoot", objs: []runtime.Object{makePVC(nil), makePV(nil)}, want: "pvc-claim-uid"},
		{
			name: "hostPath PV of another provisioner",
			objs: []runtime.Object{makePVC(nil), makePV(func(pv *v1.PersistentVolume) {
				pv.Annotations = nil
				pv.Spec.HostPath.Path = hostDir
			})},
			want: hostDir,
		},
		{
			name: "local PV",
			objs: []runtime.Object{makePVC(nil), makePV(func(pv *v1.PersistentVolume) {
				pv.Annotations = nil
				pv.Spec.HostPath = nil
				pv.Spec.Local = &v1.LocalVolumeSource{Path: hostDir}
			})},
			want: hostDir,
		},
		{name: "claim missing", wantErr: `persistentvolumeclaim "data" not found`},
		{
			name:    "claim pending",
			objs:    []runtime.Object{makePVC(func(c *v1.PersistentVolumeClaim) { c.Status.Phase = v1.ClaimPending; c.Spec.VolumeName = "" })},
			wantErr: `persistentvolumeclaim "data" is not bound`,
		},
		{name: "PV missing", objs: []runtime.Object{makePVC(nil)}, wantErr: `persistentvolume "pvc-claim-uid" not found`},
		{
			name:    "PV bound elsewhere",
			objs:    []runtime.Object{makePVC(nil), makePV(func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef.UID = "other" })},
			wantErr: "found PV object pvc-claim-uid but its pv.Spec.ClaimRef.UID (other) does not point to claim.UID (claim-uid)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			pod := makePod(withVolume(v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}))
			paths, err := f.m.Prepare(context.Background(), pod)
			if tc.wantErr != "" {
				want := `MountVolume.SetUp failed for volume "v" : ` + tc.wantErr
				if errString(err) != want {
					t.Fatalf("error\n got %v\nwant %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if !filepath.IsAbs(want) {
				want = filepath.Join(f.pvRoot, want)
			}
			if paths["v"] != want {
				t.Errorf("path %s, want %s", paths["v"], want)
			}
			if info, err := os.Stat(want); err != nil || !info.IsDir() {
				t.Errorf("%s is not a directory: %v", want, err)
			}
		})
	}
}
