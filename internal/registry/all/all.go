// Package all lists every resource the API server serves.
package all

import (
	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/admissionregistration"
	"github.com/tranche/tranche/internal/registry/apiextensions"
	"github.com/tranche/tranche/internal/registry/apiregistration"
	"github.com/tranche/tranche/internal/registry/apps"
	"github.com/tranche/tranche/internal/registry/authentication"
	"github.com/tranche/tranche/internal/registry/authorization"
	"github.com/tranche/tranche/internal/registry/autoscaling"
	"github.com/tranche/tranche/internal/registry/batch"
	"github.com/tranche/tranche/internal/registry/certificates"
	"github.com/tranche/tranche/internal/registry/coordination"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/registry/discovery"
	"github.com/tranche/tranche/internal/registry/events"
	"github.com/tranche/tranche/internal/registry/flowcontrol"
	"github.com/tranche/tranche/internal/registry/metrics"
	"github.com/tranche/tranche/internal/registry/networking"
	"github.com/tranche/tranche/internal/registry/node"
	"github.com/tranche/tranche/internal/registry/policy"
	"github.com/tranche/tranche/internal/registry/rbac"
	"github.com/tranche/tranche/internal/registry/resource"
	"github.com/tranche/tranche/internal/registry/scheduling"
	"github.com/tranche/tranche/internal/registry/storage"
	"github.com/tranche/tranche/internal/registry/storagemigration"
)

// Resources returns a fresh list of every served resource, core group first.
func Resources() []registry.Resource {
	return []registry.Resource{
		core.NamespaceResource(),
		core.PodResource(),
		core.ServiceResource(),
		core.EndpointsResource(),
		core.NodeResource(),
		core.EventResource(),
		core.ConfigMapResource(),
		core.SecretResource(),
		core.ServiceAccountResource(),
		core.ReplicationControllerResource(),
		core.PersistentVolumeClaimResource(),
		core.PersistentVolumeResource(),
		core.PodTemplateResource(),
		core.ResourceQuotaResource(),
		core.LimitRangeResource(),

		apps.DeploymentResource(),
		apps.ReplicaSetResource(),
		apps.DaemonSetResource(),
		apps.StatefulSetResource(),
		apps.ControllerRevisionResource(),

		batch.JobResource(),
		batch.CronJobResource(),

		autoscaling.HorizontalPodAutoscalerResource(),
		autoscaling.HorizontalPodAutoscalerV1Resource(),

		discovery.EndpointSliceResource(),
		networking.IngressResource(),
		networking.IngressClassResource(),
		networking.NetworkPolicyResource(),
		coordination.LeaseResource(),
		events.EventResource(),
		storage.StorageClassResource(),
		node.RuntimeClassResource(), policy.PodDisruptionBudgetResource(),

		rbac.RoleResource(),
		rbac.ClusterRoleResource(),
		rbac.RoleBindingResource(),
		rbac.ClusterRoleBindingResource(),

		authorization.SelfSubjectAccessReviewResource(),
		authorization.SelfSubjectRulesReviewResource(),
		authorization.SubjectAccessReviewResource(),
		authorization.LocalSubjectAccessReviewResource(),
		authentication.TokenReviewResource(),
		authentication.SelfSubjectReviewResource(),

		metrics.NodeMetricsResource(),
		metrics.PodMetricsResource(),

		networking.ServiceCIDRResource(),
		networking.IPAddressResource(),
		storage.CSIDriverResource(),
		storage.CSINodeResource(),
		storage.CSIStorageCapacityResource(),
		storage.VolumeAttachmentResource(),
		storage.VolumeAttributesClassResource(),
		flowcontrol.FlowSchemaResource(),
		flowcontrol.PriorityLevelConfigurationResource(),
		certificates.CertificateSigningRequestResource(),
		certificates.ClusterTrustBundleResource(),
		certificates.PodCertificateRequestResource(),
		storagemigration.StorageVersionMigrationResource(),
		resource.DeviceClassResource(),
		resource.ResourceClaimResource(),
		resource.ResourceClaimTemplateResource(),
		resource.ResourceSliceResource(),
		resource.DeviceTaintRuleResource(),
		admissionregistration.ValidatingWebhookConfigurationResource(),
		admissionregistration.MutatingWebhookConfigurationResource(),
		admissionregistration.ValidatingAdmissionPolicyResource(),
		admissionregistration.ValidatingAdmissionPolicyBindingResource(),
		admissionregistration.MutatingAdmissionPolicyResource(),
		admissionregistration.MutatingAdmissionPolicyBindingResource(),
		apiextensions.CustomResourceDefinitionResource(),
		scheduling.PriorityClassResource(),
		apiregistration.APIServiceResource(),
	}
}
