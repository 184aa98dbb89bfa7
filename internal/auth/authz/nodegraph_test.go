package authz

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// check is one question to the graph: may node read resource ns/name?
type check struct {
	node, resource, ns, name string
	want                     bool
}

func (c check) String() string {
	return fmt.Sprintf("%s reads %s %s/%s", c.node, c.resource, c.ns, c.name)
}

func assertRelated(t *testing.T, g *NodeGraph, checks ...check) {
	t.Helper()
	for _, c := range checks {
		if got := g.Related(c.node, c.resource, c.ns, c.name); got != c.want {
			t.Errorf("%v: %v, want %v", c, got, c.want)
		}
	}
}

func TestNodeGraphPodReferences(t *testing.T) {
	g := NewNodeGraph()
	g.SetPod(makePod("t1", "web", "a", func(p *v1.Pod) {
		p.Spec.ServiceAccountName = "robot"
		p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "pull"}}
		p.Spec.Volumes = []v1.Volume{
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "vol-cm"}}}},
			{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-secret"}}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-cm"}}},
			}}}},
			{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
		}
		p.Spec.InitContainers = []v1.Container{{Name: "init", EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "init-env"}}}}}}
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "K", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "env-cm"}, Key: "k"}}}}
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu-claim")}}
	}))
	assertRelated(t, g,
		check{"a", "serviceaccounts", "t1", "robot", true},
		check{"a", "secrets", "t1", "pull", true},
		check{"a", "configmaps", "t1", "vol-cm", true},
		check{"a", "secrets", "t1", "proj-secret", true},
		check{"a", "configmaps", "t1", "proj-cm", true},
		check{"a", "secrets", "t1", "init-env", true},
		check{"a", "configmaps", "t1", "env-cm", true},
		check{"a", "persistentvolumeclaims", "t1", "web-scratch", true},
		check{"a", "resourceclaims", "t1", "gpu-claim", true},
		check{"a", "configmaps", "t1", "kube-root-ca.crt", true},
		// Names are per kind and per namespace, and other nodes get nothing.
		check{"a", "configmaps", "t1", "pull", false},
		check{"a", "secrets", "t2", "pull", false},
		check{"b", "secrets", "t1", "pull", false},
		check{"a", "serviceaccounts", "t1", "default", false},
	)
}

func TestNodeGraphPodLifecycle(t *testing.T) {
	withSecret := func(name string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: name}}}}
		}
	}
	g := NewNodeGraph()
	t.Run("pending pod grants nothing", func(t *testing.T) {
		g.SetPod(makePod("t1", "p1", "", withSecret("s")))
		assertRelated(t, g, check{"a", "secrets", "t1", "s", false})
		if _, _, found := g.PodNode("t1", "p1"); found {
			t.Error("unbound pod found")
		}
	})
	t.Run("bound pod grants its node", func(t *testing.T) {
		g.SetPod(makePod("t1", "p1", "a", withSecret("s")))
		assertRelated(t, g, check{"a", "secrets", "t1", "s", true}, check{"b", "secrets", "t1", "s", false},
			check{"a", "serviceaccounts", "t1", "default", true})
		if node, _, found := g.PodNode("t1", "p1"); !found || node != "a" {
			t.Errorf("PodNode = %q %v, want a", node, found)
		}
	})
	t.Run("second pod on the node shares the secret", func(t *testing.T) {
		g.SetPod(makePod("t1", "p2", "a", withSecret("s")))
		g.DeletePod("t1", "p1")
		assertRelated(t, g, check{"a", "secrets", "t1", "s", true})
	})
	t.Run("pod moved to another node", func(t *testing.T) {
		g.SetPod(makePod("t1", "p2", "b", withSecret("s")))
		assertRelated(t, g, check{"a", "secrets", "t1", "s", false}, check{"b", "secrets", "t1", "s", true})
	})
	t.Run("pod changed its references", func(t *testing.T) {
		g.SetPod(makePod("t1", "p2", "b", withSecret("s2")))
		assertRelated(t, g, check{"b", "secrets", "t1", "s", false}, check{"b", "secrets", "t1", "s2", true})
	})
	t.Run("pod without automount gets no CA bundle", func(t *testing.T) {
		g.SetPod(makePod("t1", "p3", "c", func(p *v1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(false) }))
		assertRelated(t, g, check{"c", "configmaps", "t1", "kube-root-ca.crt", false}, check{"c", "serviceaccounts", "t1", "default", true})
		g.DeletePod("t1", "p3")
	})
	t.Run("deleted pod grants nothing", func(t *testing.T) {
		g.DeletePod("t1", "p2")
		g.DeletePod("t1", "never-there")
		assertRelated(t, g, check{"b", "secrets", "t1", "s2", false}, check{"b", "serviceaccounts", "t1", "default", false})
		if len(g.uses) != 0 || len(g.pods) != 0 {
			t.Errorf("graph keeps %d objects and %d pods after every pod left", len(g.uses), len(g.pods))
		}
	})
	t.Run("mirror pod grants nothing but its binding", func(t *testing.T) {
		g.SetPod(makePod("t1", "static-a", "a", func(p *v1.Pod) {
			withSecret("s")(p)
			p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"}
		}))
		assertRelated(t, g, check{"a", "secrets", "t1", "s", false})
		if node, _, _ := g.PodNode("t1", "static-a"); node != "a" {
			t.Errorf("mirror pod bound to %q", node)
		}
	})
}

func TestNodeGraphPersistentVolumes(t *testing.T) {
	g := NewNodeGraph()
	pv := func(name, claim string, mutate func(*v1.PersistentVolume)) *v1.PersistentVolume {
		p := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if claim != "" {
			p.Spec.ClaimRef = &v1.ObjectReference{Namespace: "t1", Name: claim}
		}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	g.SetPod(makePod("t1", "db", "a", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	}))
	g.SetPV(pv("pv-free", "", nil))
	g.SetPV(pv("pv-data", "data", func(p *v1.PersistentVolume) {
		p.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h",
			NodePublishSecretRef: &v1.SecretReference{Namespace: "t1", Name: "csi-creds"}}
	}))
	assertRelated(t, g,
		check{"a", "persistentvolumeclaims", "t1", "data", true},
		check{"a", "persistentvolumes", "", "pv-data", true},
		check{"b", "persistentvolumes", "", "pv-data", false},
		check{"a", "persistentvolumes", "", "pv-free", false},
		check{"a", "secrets", "t1", "csi-creds", true},
		check{"b", "secrets", "t1", "csi-creds", false},
	)
	// The volume is bound to another claim, then deleted.
	g.SetPV(pv("pv-data", "other", nil))
	assertRelated(t, g, check{"a", "persistentvolumes", "", "pv-data", false}, check{"a", "secrets", "t1", "csi-creds", false})
	g.SetPV(pv("pv-data", "data", nil))
	assertRelated(t, g, check{"a", "persistentvolumes", "", "pv-data", true})
	g.DeletePV("pv-data")
	assertRelated(t, g, check{"a", "persistentvolumes", "", "pv-data", false})
	// The pod leaves: its claim's volume goes with it.
	g.SetPV(pv("pv-data", "data", nil))
	g.DeletePod("t1", "db")
	assertRelated(t, g, check{"a", "persistentvolumes", "", "pv-data", false})
}

// BenchmarkNodeGraphRelated measures one decision in a graph of 10,000 pods on 100
// nodes, each with a Secret, a ConfigMap and a ServiceAccount ("index"), beside what a
// decision costs that scans the pods instead, as one answered from a LIST per request
// would at the very least, without its I/O ("scan"). Compare the two ns/op.
func BenchmarkNodeGraphRelated(b *testing.B) {
	g := NewNodeGraph()
	var pods []*v1.Pod
	for i := range 10000 {
		p := makePod(fmt.Sprintf("ns%d", i%50), fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", i%100), func(p *v1.Pod) {
			p.Spec.ServiceAccountName = fmt.Sprintf("sa%d", i)
			p.Spec.Volumes = []v1.Volume{
				{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: fmt.Sprintf("s%d", i)}}},
				{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: fmt.Sprintf("c%d", i)}}}},
			}
		})
		pods = append(pods, p)
		g.SetPod(p)
	}
	queries := make([]check, 10000)
	for i := range queries {
		queries[i] = check{node: fmt.Sprintf("n%d", i%100), resource: "secrets", ns: fmt.Sprintf("ns%d", i%50), name: fmt.Sprintf("s%d", i)}
	}
	b.Run("index", func(b *testing.B) {
		for i := range b.N {
			q := queries[i%len(queries)]
			if !g.Related(q.node, q.resource, q.ns, q.name) {
				b.Fatal("relation missing")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for i := range b.N {
			q := queries[i%len(queries)]
			want := objectRef{q.resource, q.ns, q.name}
			found := false
			for _, p := range pods {
				if p.Spec.NodeName == q.node && p.Namespace == q.ns && slices.Contains(podRefs(p), want) {
					found = true
					break
				}
			}
			if !found {
				b.Fatal("relation missing")
			}
		}
	})
}
