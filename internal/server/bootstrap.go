package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// systemNamespaces exist from the start, as on every Kubernetes cluster.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// bootstrapObjects creates the objects every cluster has (namespaces, RBAC policy) through the
// API, so they are validated and defaulted like anything a user writes. Existing objects
// are left as they are.
func bootstrapObjects(ctx context.Context, restCfg *rest.Config, cfg Config, log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	// The listener may take a moment; wait for it rather than fail.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.Discovery().ServerVersion()
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("API server did not answer: %w", err)
	}
	for _, name := range systemNamespaces {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	if err := bootstrapRBAC(ctx, client); err != nil {
		return err
	}
	if err := ensureAPIService(ctx, client, cfg); err != nil {
		return err
	}
	if err := ensureIngress(ctx, client, cfg); err != nil {
		return err
	}
	log.Debug("bootstrap objects present")
	return nil
}
