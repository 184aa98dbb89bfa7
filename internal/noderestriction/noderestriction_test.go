package noderestriction

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/auth/authn"
)

// fakeLookup holds pods by "namespace/name" and nodes by name.
type fakeLookup struct {
	pods  map[string]*v1.Pod
	nodes map[string]*v1.Node
}

var _ Lookup = fakeLookup{}

func (f fakeLookup) Pod(ns, name string) (*v1.Pod, error) {
	if p, ok := f.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (f fakeLookup) Node(name string) (*v1.Node, error) {
	if n, ok := f.nodes[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
}

type userKey struct{}

func asUser(u *authn.User) context.Context {
	return context.WithValue(context.Background(), userKey{}, u)
}

func userOf(ctx context.Context) *authn.User { u, _ := ctx.Value(userKey{}).(*authn.User); return u }

var (
	nodeA = &authn.User{Name: "system:node:a", Groups: []string{"system:nodes", "system:authenticated"}}
	admin = &authn.User{Name: "admin", Groups: []string{"system:masters"}}
)

func makeNode(name string, mutate func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-node-" + name),
		Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func makePod(name, node string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: name, UID: k8stypes.UID("uid-pod-" + name), Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func mirror(node string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "hash"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: "uid-node-" + "a", Controller: ptr.To(true)}}
	}
}

func request(op apiserver.AdmitOp, resource, sub, ns, name string, obj, old runtime.Object) *apiserver.AdmissionRequest {
	gr := schema.GroupResource{Resource: resource}
	if resource == "leases" {
		gr.Group = "coordination.k8s.io"
	}
	return &apiserver.AdmissionRequest{Operation: op, Resource: gr.WithVersion("v1"), Subresource: sub,
		Namespace: ns, Name: name, Object: obj, OldObject: old}
}

func TestValidate(t *testing.T) {
	lookup := fakeLookup{nodes: map[string]*v1.Node{"a": makeNode("a", nil)}}
	p := New(userOf, lookup)
	withLabel := func(k, v string) func(*v1.Node) { return func(n *v1.Node) { n.Labels[k] = v } }
	cases := []struct {
		name string
		user *authn.User
		req  *apiserver.AdmissionRequest
		want string // "" means admitted; else the Forbidden message
	}{
		{name: "register own node", user: nodeA, req: request(apiserver.AdmitCreate, "nodes", "", "", "a",
			makeNode("a", withLabel("topology.kubernetes.io/zone", "z1")), nil)},
		{name: "register another node", user: nodeA, req: request(apiserver.AdmitCreate, "nodes", "", "", "b", makeNode("b", nil), nil),
			want: `nodes "b" is forbidden: node "a" is not allowed to modify node "b"`},
		{name: "register with restricted labels", user: nodeA, req: request(apiserver.AdmitCreate, "nodes", "", "", "a",
			makeNode("a", func(n *v1.Node) {
				n.Labels["node-restriction.kubernetes.io/pool"] = "x"
				n.Labels["node-role.kubernetes.io/control-plane"] = ""
				n.Labels["example.com/ok"] = "y"
			}), nil),
			want: `nodes "a" is forbidden: node "a" is not allowed to set the following labels: node-restriction.kubernetes.io/pool, node-role.kubernetes.io/control-plane`},
		{name: "update own kubelet labels", user: nodeA, req: request(apiserver.AdmitUpdate, "nodes", "", "", "a",
			makeNode("a", func(n *v1.Node) {
				n.Labels["kubernetes.io/os"] = "linux"
				n.Labels["node.kubernetes.io/instance-type"] = "big"
				n.Labels["example.com/free"] = "y"
			}), makeNode("a", nil))},
		{name: "update another node's labels", user: nodeA, req: request(apiserver.AdmitUpdate, "nodes", "", "", "b",
			makeNode("b", withLabel("example.com/x", "y")), makeNode("b", nil)),
			want: `nodes "b" is forbidden: node "a" is not allowed to modify node "b"`},
		{name: "remove a restricted label", user: nodeA, req: request(apiserver.AdmitUpdate, "nodes", "", "", "a",
			makeNode("a", nil), makeNode("a", withLabel("node-restriction.kubernetes.io/pool", "x"))),
			want: `nodes "a" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool`},
		{name: "modify own taints", user: nodeA, req: request(apiserver.AdmitUpdate, "nodes", "", "", "a",
			makeNode("a", nil), makeNode("a", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}} })),
			want: `nodes "a" is forbidden: node "a" is not allowed to modify taints`},
		{name: "own node status", user: nodeA, req: request(apiserver.AdmitUpdate, "nodes", "status", "", "a", makeNode("a", nil), makeNode("a", nil))},
		{name: "another node's status", user: nodeA, req: request(apiserver.AdmitUpdate, "nodes", "status", "", "b", makeNode("b", nil), makeNode("b", nil)),
			want: `nodes "b" is forbidden: node "a" is not allowed to modify node "b"`},
		{name: "admin labels any node", user: admin, req: request(apiserver.AdmitUpdate, "nodes", "", "", "b",
			makeNode("b", withLabel("node-restriction.kubernetes.io/pool", "x")), makeNode("b", nil))},
		{name: "status of own pod", user: nodeA, req: request(apiserver.AdmitUpdate, "pods", "status", "t1", "p",
			makePod("p", "a", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }), makePod("p", "a", nil))},
		{name: "status of another node's pod", user: nodeA, req: request(apiserver.AdmitUpdate, "pods", "status", "t1", "p",
			makePod("p", "b", nil), makePod("p", "b", nil)),
			want: `pods "p" is forbidden: node "a" can only update pod status for pods with spec.nodeName set to itself`},
		{name: "labels through pod status", user: nodeA, req: request(apiserver.AdmitUpdate, "pods", "status", "t1", "p",
			makePod("p", "a", func(p *v1.Pod) { p.Labels["app"] = "y" }), makePod("p", "a", nil)),
			want: `pods "p" is forbidden: node "a" cannot update labels through pod status`},
		{name: "mirror pod", user: nodeA, req: request(apiserver.AdmitCreate, "pods", "", "t1", "static-a", makePod("static-a", "a", mirror("a")), nil)},
		{name: "ordinary pod", user: nodeA, req: request(apiserver.AdmitCreate, "pods", "", "t1", "p", makePod("p", "a", nil), nil),
			want: `pods "p" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "a" can only create mirror pods`},
		{name: "mirror pod on another node", user: nodeA, req: request(apiserver.AdmitCreate, "pods", "", "t1", "m", makePod("m", "b", mirror("a")), nil),
			want: `pods "m" is forbidden: node "a" can only create pods with spec.nodeName set to itself`},
		{name: "mirror pod owned by another node", user: nodeA, req: request(apiserver.AdmitCreate, "pods", "", "t1", "m", makePod("m", "a", mirror("b")), nil),
			want: `pods "m" is forbidden: node "a" can only create pods with an owner reference set to itself`},
		{name: "mirror pod with a secret", user: nodeA, req: request(apiserver.AdmitCreate, "pods", "", "t1", "m", makePod("m", "a", func(p *v1.Pod) {
			mirror("a")(p)
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}
		}), nil),
			want: `pods "m" is forbidden: node "a" can not create pods that reference secrets`},
		{name: "mirror pod with a service account", user: nodeA, req: request(apiserver.AdmitCreate, "pods", "", "t1", "m", makePod("m", "a", func(p *v1.Pod) {
			mirror("a")(p)
			p.Spec.ServiceAccountName = "robot"
		}), nil),
			want: `pods "m" is forbidden: node "a" can not create pods that reference a service account`},
		{name: "update a pod", user: nodeA, req: request(apiserver.AdmitUpdate, "pods", "", "t1", "p", makePod("p", "a", nil), makePod("p", "a", nil)),
			want: `pods "p" is forbidden: unexpected operation "UPDATE", node "a" can only create and delete mirror pods`},
		{name: "own lease", user: nodeA, req: request(apiserver.AdmitCreate, "leases", "", "kube-node-lease", "a", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, nil)},
		{name: "another node's lease", user: nodeA, req: request(apiserver.AdmitCreate, "leases", "", "kube-node-lease", "b", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, nil),
			want: `leases.coordination.k8s.io "b" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "claim spec", user: nodeA, req: request(apiserver.AdmitUpdate, "persistentvolumeclaims", "", "t1", "c", &v1.PersistentVolumeClaim{}, &v1.PersistentVolumeClaim{}),
			want: `persistentvolumeclaims "c" is forbidden: may only update PVC status`},
		{name: "claim conditions", user: nodeA, req: request(apiserver.AdmitUpdate, "persistentvolumeclaims", "status", "t1", "c",
			&v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Conditions: []v1.PersistentVolumeClaimCondition{{Type: "Resizing"}}}}, &v1.PersistentVolumeClaim{})},
		{name: "claim phase", user: nodeA, req: request(apiserver.AdmitUpdate, "persistentvolumeclaims", "status", "t1", "c",
			&v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimLost}}, &v1.PersistentVolumeClaim{}),
			want: `persistentvolumeclaims "c" is forbidden: node "a" is not allowed to update fields other than status.capacity and status.conditions`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Validate(asUser(tc.user), tc.req)
			checkErr(t, err, tc.want)
		})
	}
}

// checkErr wants no error for want "", else a Forbidden error whose message starts with want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("refused: %v", err)
	case want != "" && err == nil:
		t.Errorf("admitted, want %q", want)
	case want != "" && (!apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), want)):
		t.Errorf("error %v (forbidden %v), want %q", err, apierrors.IsForbidden(err), want)
	}
}

func TestAdmitTokenRequest(t *testing.T) {
	lookup := fakeLookup{pods: map[string]*v1.Pod{"t1/on-a": makePod("on-a", "a", nil), "t1/on-b": makePod("on-b", "b", nil)}}
	p := New(userOf, lookup)
	bound := func(name, uid string) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: k8stypes.UID(uid)}}}
	}
	cases := []struct {
		name string
		user *authn.User
		tr   *authenticationv1.TokenRequest
		want string
	}{
		{name: "bound to own pod", user: nodeA, tr: bound("on-a", "uid-pod-on-a")},
		{name: "unbound", user: nodeA, tr: &authenticationv1.TokenRequest{},
			want: `serviceaccounts "robot" is forbidden: node requested token not bound to a pod`},
		{name: "bound to a node", user: nodeA, tr: &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: "a", UID: "uid-node-a"}}},
			want: `serviceaccounts "robot" is forbidden: node requested token not bound to a pod`},
		{name: "without uid", user: nodeA, tr: bound("on-a", ""),
			want: `serviceaccounts "robot" is forbidden: node requested token with a pod binding without a uid`},
		{name: "stale uid", user: nodeA, tr: bound("on-a", "old"),
			want: `serviceaccounts "robot" is forbidden: the UID in the bound object reference (old) does not match the UID in record`},
		{name: "pod on another node", user: nodeA, tr: bound("on-b", "uid-pod-on-b"),
			want: `serviceaccounts "robot" is forbidden: node requested token bound to a pod scheduled on a different node`},
		{name: "anyone else", user: admin, tr: &authenticationv1.TokenRequest{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, p.AdmitTokenRequest(tc.user, "t1", "robot", tc.tr), tc.want)
		})
	}
	if err := p.AdmitTokenRequest(nodeA, "t1", "robot", bound("gone", "u")); !apierrors.IsNotFound(err) {
		t.Errorf("token bound to a missing pod: %v, want NotFound", err)
	}
}
