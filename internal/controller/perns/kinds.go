package perns

import (
	"context"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// DefaultServiceAccount is the account every namespace gets; pods naming none use it.
const DefaultServiceAccount = "default"

// RootCAConfigMap is the ConfigMap holding the cluster CA in every namespace; the
// kube-api-access volume of every pod mounts its ca.crt.
const RootCAConfigMap = "kube-root-ca.crt"

// rootCADescription is the annotation Kubernetes' root CA publisher sets.
const rootCADescription = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."

// ServiceAccounts keeps the "default" ServiceAccount in every namespace.
func ServiceAccounts(client kubernetes.Interface, f informers.SharedInformerFactory, log *slog.Logger) *Controller {
	lister := f.Core().V1().ServiceAccounts().Lister()
	return New(f, Kind{
		Name:      DefaultServiceAccount,
		QueueName: "serviceaccount",
		Informer:  f.Core().V1().ServiceAccounts().Informer(),
		Ensure: func(ctx context.Context, ns string) error {
			if _, err := lister.ServiceAccounts(ns).Get(DefaultServiceAccount); err == nil {
				return nil
			}
			sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceAccount, Namespace: ns}}
			_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return err
		},
	}, log)
}

// RootCA publishes caPEM as kube-root-ca.crt in every namespace.
func RootCA(client kubernetes.Interface, f informers.SharedInformerFactory, caPEM []byte, log *slog.Logger) *Controller {
	lister := f.Core().V1().ConfigMaps().Lister()
	want := func(ns string) *v1.ConfigMap {
		return &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Namespace: ns,
				Annotations: map[string]string{"kubernetes.io/description": rootCADescription}},
			Data: map[string]string{"ca.crt": string(caPEM)},
		}
	}
	return New(f, Kind{
		Name:      RootCAConfigMap,
		QueueName: "root_ca_cert_publisher",
		Informer:  f.Core().V1().ConfigMaps().Informer(),
		Ensure: func(ctx context.Context, ns string) error {
			cur, err := lister.ConfigMaps(ns).Get(RootCAConfigMap)
			if apierrors.IsNotFound(err) {
				_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, want(ns), metav1.CreateOptions{})
				return err
			}
			if err != nil || cur.Data["ca.crt"] == string(caPEM) {
				return err
			}
			next := cur.DeepCopy()
			next.Data = want(ns).Data
			_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, next, metav1.UpdateOptions{})
			return err
		},
	}, log)
}
