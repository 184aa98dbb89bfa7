package core

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Image volumes (volumes[].image, KEP 4639), defaulted and validated as
// kube-apiserver does with the ImageVolume feature on (its default since 1.35).

// podDefaultImageVolume sets an image volume's pullPolicy when it is empty, by the
// reference's tag as for a container's image (SetDefaults_Volume): Always for
// "latest" or no tag and no digest, IfNotPresent otherwise.
func podDefaultImageVolume(src *v1.ImageVolumeSource) {
	if src != nil && src.PullPolicy == "" {
		src.PullPolicy = podDefaultPullPolicy(src.Reference)
	}
}

// podValidateImageVolume is validateImageVolumeSource: a reference is required and
// the pull policy one of Always, IfNotPresent and Never. The reference's syntax is
// left to the node, which reports InvalidImageName.
func podValidateImageVolume(src *v1.ImageVolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if src.Reference == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("reference"), ""))
	}
	switch p := fldPath.Child("pullPolicy"); {
	case src.PullPolicy == "":
		allErrs = append(allErrs, field.Required(p, ""))
	case !podSupportedPullPolicies.Has(string(src.PullPolicy)):
		allErrs = append(allErrs, field.NotSupported(p, src.PullPolicy, sets.List(podSupportedPullPolicies)))
	}
	return allErrs
}

// podValidateImageVolumeMount refuses bindMountOptions on a mount of an image volume,
// as ValidateVolumeMounts does: the runtime decides how an image is mounted.
func podValidateImageVolumeMount(m *v1.VolumeMount, vols map[string]v1.VolumeSource, p *field.Path) field.ErrorList {
	if vs, ok := vols[m.Name]; ok && vs.Image != nil && len(m.BindMountOptions) > 0 {
		return field.ErrorList{field.Invalid(p.Child("bindMountOptions"), m.BindMountOptions, "bindMountOptions may not be used with image volumes")}
	}
	return nil
}
