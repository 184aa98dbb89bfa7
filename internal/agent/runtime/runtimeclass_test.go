package runtime

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestRuntimeHandlerError(t *testing.T) {
	classes := map[string]string{"plain": "runc", "default": "", "kata": "kata"}
	lookup := func(_ context.Context, kind, _, name string) (map[string]string, bool, error) {
		h, ok := classes[name]
		if kind != "RuntimeClass" || !ok {
			return nil, false, nil
		}
		return map[string]string{"handler": h}, true, nil
	}
	m := &Manager{cfg: Config{Lookup: lookup}}
	for _, tc := range []struct {
		class, want string
	}{
		{class: ""},
		{class: "plain"},
		{class: "default"},
		{class: "kata", want: `failed to get sandbox runtime: no runtime for "kata" is configured`},
		{class: "nope", want: `failed to lookup RuntimeClass nope: runtimeclasses.node.k8s.io "nope" not found`},
	} {
		pod := &v1.Pod{}
		if tc.class != "" {
			pod.Spec.RuntimeClassName = &tc.class
		}
		err := m.runtimeHandlerError(context.Background(), pod)
		if got := errText(err); got != tc.want {
			t.Errorf("class %q: %q, want %q", tc.class, got, tc.want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
