package openapi

import (
	"encoding/json"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
)

// clusterResources is a server's worth of resources (40), roughly what tranche serves.
func clusterResources() []registry.Resource {
	type entry struct {
		gv          schema.GroupVersion
		kind        string
		plural      string
		obj, list   runtime.Object
		clusterWide bool
		status      bool
		scale       bool
	}
	core, apps := v1.SchemeGroupVersion, appsv1.SchemeGroupVersion
	entries := []entry{
		{core, "Pod", "pods", &v1.Pod{}, &v1.PodList{}, false, true, false},
		{core, "Service", "services", &v1.Service{}, &v1.ServiceList{}, false, true, false},
		{core, "Endpoints", "endpoints", &v1.Endpoints{}, &v1.EndpointsList{}, false, false, false},
		{core, "Node", "nodes", &v1.Node{}, &v1.NodeList{}, true, true, false},
		{core, "Namespace", "namespaces", &v1.Namespace{}, &v1.NamespaceList{}, true, true, false},
		{core, "ConfigMap", "configmaps", &v1.ConfigMap{}, &v1.ConfigMapList{}, false, false, false},
		{core, "Secret", "secrets", &v1.Secret{}, &v1.SecretList{}, false, false, false},
		{core, "ServiceAccount", "serviceaccounts", &v1.ServiceAccount{}, &v1.ServiceAccountList{}, false, false, false},
		{core, "Event", "events", &v1.Event{}, &v1.EventList{}, false, false, false},
		{core, "PersistentVolume", "persistentvolumes", &v1.PersistentVolume{}, &v1.PersistentVolumeList{}, true, true, false},
		{core, "PersistentVolumeClaim", "persistentvolumeclaims", &v1.PersistentVolumeClaim{}, &v1.PersistentVolumeClaimList{}, false, true, false},
		{core, "ReplicationController", "replicationcontrollers", &v1.ReplicationController{}, &v1.ReplicationControllerList{}, false, true, true},
		{core, "ResourceQuota", "resourcequotas", &v1.ResourceQuota{}, &v1.ResourceQuotaList{}, false, true, false},
		{core, "LimitRange", "limitranges", &v1.LimitRange{}, &v1.LimitRangeList{}, false, false, false},
		{core, "PodTemplate", "podtemplates", &v1.PodTemplate{}, &v1.PodTemplateList{}, false, false, false},
		{apps, "Deployment", "deployments", &appsv1.Deployment{}, &appsv1.DeploymentList{}, false, true, true},
		{apps, "ReplicaSet", "replicasets", &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}, false, true, true},
		{apps, "StatefulSet", "statefulsets", &appsv1.StatefulSet{}, &appsv1.StatefulSetList{}, false, true, true},
		{apps, "DaemonSet", "daemonsets", &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}, false, true, false},
		{apps, "ControllerRevision", "controllerrevisions", &appsv1.ControllerRevision{}, &appsv1.ControllerRevisionList{}, false, false, false},
		{batchv1.SchemeGroupVersion, "Job", "jobs", &batchv1.Job{}, &batchv1.JobList{}, false, true, false},
		{batchv1.SchemeGroupVersion, "CronJob", "cronjobs", &batchv1.CronJob{}, &batchv1.CronJobList{}, false, true, false},
		{discoveryv1.SchemeGroupVersion, "EndpointSlice", "endpointslices", &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{}, false, false, false},
		{networkingv1.SchemeGroupVersion, "Ingress", "ingresses", &networkingv1.Ingress{}, &networkingv1.IngressList{}, false, true, false},
		{networkingv1.SchemeGroupVersion, "IngressClass", "ingressclasses", &networkingv1.IngressClass{}, &networkingv1.IngressClassList{}, true, false, false},
		{networkingv1.SchemeGroupVersion, "NetworkPolicy", "networkpolicies", &networkingv1.NetworkPolicy{}, &networkingv1.NetworkPolicyList{}, false, false, false},
		{rbacv1.SchemeGroupVersion, "Role", "roles", &rbacv1.Role{}, &rbacv1.RoleList{}, false, false, false},
		{rbacv1.SchemeGroupVersion, "RoleBinding", "rolebindings", &rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}, false, false, false},
		{rbacv1.SchemeGroupVersion, "ClusterRole", "clusterroles", &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleList{}, true, false, false},
		{rbacv1.SchemeGroupVersion, "ClusterRoleBinding", "clusterrolebindings", &rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{}, true, false, false},
		{coordinationv1.SchemeGroupVersion, "Lease", "leases", &coordinationv1.Lease{}, &coordinationv1.LeaseList{}, false, false, false},
		{eventsv1.SchemeGroupVersion, "Event", "events", &eventsv1.Event{}, &eventsv1.EventList{}, false, false, false},
		{policyv1.SchemeGroupVersion, "PodDisruptionBudget", "poddisruptionbudgets", &policyv1.PodDisruptionBudget{}, &policyv1.PodDisruptionBudgetList{}, false, true, false},
		{autoscalingv2.SchemeGroupVersion, "HorizontalPodAutoscaler", "horizontalpodautoscalers", &autoscalingv2.HorizontalPodAutoscaler{}, &autoscalingv2.HorizontalPodAutoscalerList{}, false, true, false},
		{schedulingv1.SchemeGroupVersion, "PriorityClass", "priorityclasses", &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{}, true, false, false},
		{storagev1.SchemeGroupVersion, "StorageClass", "storageclasses", &storagev1.StorageClass{}, &storagev1.StorageClassList{}, true, false, false},
		{certificatesv1.SchemeGroupVersion, "CertificateSigningRequest", "certificatesigningrequests", &certificatesv1.CertificateSigningRequest{}, &certificatesv1.CertificateSigningRequestList{}, true, true, false},
		{admissionregistrationv1.SchemeGroupVersion, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", &admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{}, true, false, false},
		{authenticationv1.SchemeGroupVersion, "TokenReview", "tokenreviews", &authenticationv1.TokenReview{}, &authenticationv1.TokenReview{}, true, false, false},
		{authorizationv1.SchemeGroupVersion, "SubjectAccessReview", "subjectaccessreviews", &authorizationv1.SubjectAccessReview{}, &authorizationv1.SubjectAccessReview{}, true, false, false},
	}
	var out []registry.Resource
	for _, e := range entries {
		out = append(out, makeResource(e.gv.WithKind(e.kind), e.plural, e.obj, e.list, func(r *registry.Resource) {
			r.Namespaced = !e.clusterWide
			if e.status {
				r.Status = &registry.StatusStrategy{}
			}
			if e.scale {
				r.Scale = &registry.ScaleStrategy{}
			}
			if e.kind == "TokenReview" || e.kind == "SubjectAccessReview" {
				r.Verbs = []string{"create"}
			}
		}))
	}
	return out
}

// BenchmarkBuild builds the documents of 40 resources; Build runs once at start-up and is
// reported against a budget of one second.
func BenchmarkBuild(b *testing.B) {
	resources := clusterResources()
	const budget = time.Second
	var d *Documents
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var err error
		if d, err = Build(resources, "v1.32.0-bench"); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(budget), "budget-fraction")
	b.ReportMetric(float64(len(d.V2JSON()))/1e6, "v2-MB")
}

// TestClusterResourcesProtobuf checks that gnostic accepts the documents of every resource
// tranche serves, since the protobuf conversion happens lazily and cannot report errors.
func TestClusterResourcesProtobuf(t *testing.T) {
	d, err := Build(clusterResources(), "v1.32.0-test")
	if err != nil {
		t.Fatal(err)
	}
	if d.V2Protobuf() == nil {
		t.Error("the v2 document does not convert to protobuf")
	}
	var index struct {
		Paths map[string]interface{} `json:"paths"`
	}
	if err := json.Unmarshal(d.V3Index(), &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Paths) != 16 {
		t.Errorf("index has %d group versions, want 16", len(index.Paths))
	}
	for gv := range index.Paths {
		if pb, ok := d.V3Protobuf(gv); !ok || pb == nil {
			t.Errorf("the %s document does not convert to protobuf", gv)
		}
	}
}
