package crd

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// BenchmarkWebhookConversionList lists 100 custom resources stored as v1 through v1 (no
// conversion) and through v2 (one ConversionReview per object, to a loopback webhook),
// and reports the converted list's cost as a ratio of the unconverted one.
func BenchmarkWebhookConversionList(b *testing.B) {
	a, _ := twoServers(b)
	a.QPS, a.Burst = 1e6, 1e6 // client-go's default 5 QPS would be all we measure
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var calls atomic.Int64
	webhook := hostPortWebhook(b, &calls)
	if _, err := apiextclient.NewForConfigOrDie(a).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, endpointCRD(webhook), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(a)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "endpoints"}).Namespace("default")
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "endpoints"}).Namespace("default")
	const n = 100
	for i := 0; i < n; {
		_, err := v1.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Endpoint",
			"metadata": map[string]interface{}{"name": fmt.Sprintf("e%03d", i)}, "hostPort": fmt.Sprintf("h%d:80", i)}}, metav1.CreateOptions{})
		if err != nil {
			if ctx.Err() != nil {
				b.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the resource is served a moment after Established
			continue
		}
		i++
	}
	timeList := func(c dynamic.ResourceInterface) time.Duration {
		start := time.Now()
		for range b.N {
			l, err := c.List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != n {
				b.Fatalf("list: %v", err)
			}
		}
		return time.Since(start)
	}
	b.ResetTimer()
	plain := timeList(v1)
	converted := timeList(v2)
	b.StopTimer()
	b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "µs/list-v1")
	b.ReportMetric(float64(converted.Microseconds())/float64(b.N), "µs/list-v2-webhook")
	b.ReportMetric(float64(converted)/float64(plain), "v2/v1")
}
