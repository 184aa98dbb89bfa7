package perns

import (
	"context"
	"log/slog"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDefaultObjectsInEveryNamespace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	active := func(name string) *v1.Namespace {
		return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}}
	}
	terminating := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}}
	client := fake.NewClientset(active("a"), active("b"), terminating)
	f := informers.NewSharedInformerFactory(client, 0)
	log := slog.New(slog.DiscardHandler)
	sa := ServiceAccounts(client, f, log)
	ca := RootCA(client, f, []byte("PEM"), log)
	f.Start(ctx.Done())
	go sa.Run(ctx)
	go ca.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		okA, errA := client.CoreV1().ServiceAccounts("a").Get(ctx, "default", metav1.GetOptions{})
		cmB, errB := client.CoreV1().ConfigMaps("b").Get(ctx, RootCAConfigMap, metav1.GetOptions{})
		if errA == nil && errB == nil && okA != nil && cmB.Data["ca.crt"] == "PEM" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("default objects not created: %v %v", errA, errB)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := client.CoreV1().ServiceAccounts("going").Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Fatal("a terminating namespace got a service account")
	}
}
