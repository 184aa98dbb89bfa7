package ocispec

// ConfigError is a container whose configuration cannot be turned into a spec: kubelet
// reports it as CreateContainerConfigError with Message as the waiting message. Any
// other error Spec returns is what kubelet reports as CreateContainerError (the runtime
// refused the spec).
type ConfigError struct {
	// Message is kubelet's wording of the problem.
	Message string
}

// Error returns Message.
func (e *ConfigError) Error() string { return e.Message }
