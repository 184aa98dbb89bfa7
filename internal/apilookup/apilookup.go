// Package apilookup reads the ConfigMaps and Secrets a node agent puts into containers'
// environments (env valueFrom and envFrom), and the RuntimeClasses its pods name, from
// the API server.
package apilookup

import (
	"context"
	"encoding/base64"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// New returns a lookup (the agent runtime's Lookup) reading through client: for kind
// "ConfigMap" its data, binaryData base64-encoded; for kind "Secret" its data decoded,
// stringData included; for kind "RuntimeClass" (ns empty) its handler under "handler".
// found is false when the object does not exist; any other kind
// is an error.
func New(client kubernetes.Interface) func(ctx context.Context, kind, ns, name string) (data map[string]string, found bool, err error) {
	return func(ctx context.Context, kind, ns, name string) (map[string]string, bool, error) {
		switch kind {
		case "ConfigMap":
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			out := map[string]string{}
			for k, v := range cm.Data {
				out[k] = v
			}
			for k, v := range cm.BinaryData {
				out[k] = base64.StdEncoding.EncodeToString(v)
			}
			return out, true, nil
		case "Secret":
			s, err := client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			out := map[string]string{}
			for k, v := range s.Data {
				out[k] = string(v)
			}
			for k, v := range s.StringData {
				out[k] = v
			}
			return out, true, nil
		case "RuntimeClass":
			rc, err := client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			return map[string]string{"handler": rc.Handler}, true, nil
		}
		return nil, false, fmt.Errorf("unknown kind %q", kind)
	}
}
