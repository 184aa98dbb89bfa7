package volumes

import "fmt"

// ReasonFailedMount is the reason of the Warning event the agent records on
// a pod when Prepare returns a *MountError, as kubelet does.
const ReasonFailedMount = "FailedMount"

// MountError says that one volume of a pod could not be set up. The pod
// must stay ContainerCreating and the agent retries on its next sync; its
// Error text is kubelet's FailedMount event message, e.g.
// `MountVolume.SetUp failed for volume "v" : configmap "x" not found`.
type MountError struct {
	// Volume is the pod's volume name.
	Volume string
	// Err is why it failed; for a missing object it satisfies
	// apierrors.IsNotFound.
	Err error
}

// Error returns kubelet's FailedMount message.
func (e *MountError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

// Unwrap returns the cause.
func (e *MountError) Unwrap() error { return e.Err }

// Reason returns the event reason the agent records: ReasonFailedMount.
func (e *MountError) Reason() string { return ReasonFailedMount }
