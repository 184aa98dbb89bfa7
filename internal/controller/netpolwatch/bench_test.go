package netpolwatch

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkPodEvent measures what one pod appearing costs the controller: podChanged
// picks the policies whose selection it can change and each is synced. The peer figure
// is the simple alternative, syncing every policy of the namespace on every pod event;
// the ratio is what the selection saves as the namespace grows.
func BenchmarkPodEvent(b *testing.B) {
	for _, size := range []struct{ pods, policies int }{{100, 10}, {1000, 50}, {5000, 200}} {
		var objs []runtime.Object
		for i := range size.pods {
			objs = append(objs, pod("x", fmt.Sprintf("p%d", i), map[string]string{"app": fmt.Sprintf("a%d", i%size.policies)}))
		}
		var keys []string
		for i := range size.policies {
			objs = append(objs, policy("x", fmt.Sprintf("np%d", i), map[string]string{"app": fmt.Sprintf("a%d", i)}))
			keys = append(keys, fmt.Sprintf("x/np%d", i))
		}
		fx := newFixture(b, objs...)
		settle(fx.c)
		ctx := context.Background()
		newPod := pod("x", "new", map[string]string{"app": "a1"})
		b.Run(fmt.Sprintf("pods=%d/policies=%d/ours", size.pods, size.policies), func(b *testing.B) {
			for b.Loop() {
				fx.c.podChanged(nil, newPod)
				for fx.c.queue.Len() > 0 {
					key, _ := fx.c.queue.Get()
					if err := fx.c.sync(ctx, key); err != nil {
						b.Fatal(err)
					}
					fx.c.queue.Done(key)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/policies=%d/peer-sync-every-policy", size.pods, size.policies), func(b *testing.B) {
			for b.Loop() {
				for _, k := range keys {
					if err := fx.c.sync(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
