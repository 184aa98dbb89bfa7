package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"
)

// The tests of this file are issue 20's acceptance for the node: what the sig-node and
// sig-storage conformance specs check of kubelet, on the shared `tranche up`.

// node20Pods run to completion (restartPolicy Never) and print what the test checks.
const node20Pods = `apiVersion: v1
kind: Secret
metadata: {name: s}
stringData: {data-1: value-1}
---
apiVersion: v1
kind: Pod
metadata: {name: volumes}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 1000, fsGroup: 1001}
  containers:
  - name: c
    image: busybox:1.37
    command: [sh, -c, 'mount | grep " /mem " | cut -d" " -f5; stat -c "%a" /mem; stat -L -c "%A %g" /secret/data-1; cat /secret/data-1']
    volumeMounts:
    - {name: mem, mountPath: /mem}
    - {name: secret, mountPath: /secret}
  volumes:
  - {name: mem, emptyDir: {medium: Memory}}
  - {name: secret, secret: {secretName: s, defaultMode: 0440}}
---
apiVersion: v1
kind: Pod
metadata: {name: subpath, annotations: {mysubpath: mypath}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox:1.37
    command: [sh, -c, 'touch /sub/written; test -f /whole/mypath/subpath/written; echo $?']
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: ANNOTATION, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['mysubpath']"}}}
    volumeMounts:
    - {name: work, mountPath: /sub, subPathExpr: "$(ANNOTATION)/$(POD_NAME)"}
    - {name: work, mountPath: /whole}
  volumes:
  - {name: work, emptyDir: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: backsteps}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox:1.37
    command: [sh, -c, 'echo started']
    env: [{name: UP, value: ".."}]
    volumeMounts: [{name: work, mountPath: /sub, subPathExpr: "$(UP)"}]
  volumes:
  - {name: work, emptyDir: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: inits}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - {name: init1, image: busybox:1.37, command: ["true"]}
  containers:
  - {name: c, image: busybox:1.37, command: ["sleep", "3600"]}
---
apiVersion: v1
kind: Pod
metadata: {name: fallback}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox:1.37
    command: [/bin/sh, -c, '/bin/echo -n DONE; /bin/false']
    terminationMessagePolicy: FallbackToLogsOnError
---
apiVersion: v1
kind: Pod
metadata: {name: custom-message}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox:1.37
    command: [/bin/sh, -c, '/bin/echo -n DONE > /dev/termination-custom-log']
    terminationMessagePath: /dev/termination-custom-log
    securityContext: {runAsUser: 1000}
---
apiVersion: v1
kind: Pod
metadata: {name: poststart}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.37
    command: [sh, -c, 'while [ ! -f /m/hook ]; do sleep 0.1; done; cat /m/hook; sleep 3600']
    lifecycle:
      postStart:
        exec: {command: [sh, -c, 'echo poststart ran > /m/hook']}
    volumeMounts: [{name: m, mountPath: /m}]
  volumes:
  - {name: m, emptyDir: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: poststart-fails}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.37
    command: [sleep, "3600"]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, 'exit 3']}
---
apiVersion: v1
kind: Pod
metadata: {name: sysctl}
spec:
  restartPolicy: Never
  securityContext:
    sysctls: [{name: kernel.shm_rmid_forced, value: "1"}]
  containers:
  - {name: c, image: registry.k8s.io/e2e-test-images/busybox:1.36.1-1, command: [/bin/sysctl, kernel.shm_rmid_forced]}
---
apiVersion: v1
kind: Pod
metadata: {name: entrypoint}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.53, command: [/agnhost-2], args: [entrypoint-tester, override, arguments]}
---
apiVersion: v1
kind: Pod
metadata: {name: nnp-false}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/nonewprivs:1.4
    securityContext: {allowPrivilegeEscalation: false, runAsUser: 1000}
---
apiVersion: v1
kind: Pod
metadata: {name: nnp-true}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/nonewprivs:1.4
    securityContext: {allowPrivilegeEscalation: true, runAsUser: 1000}
---
apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox:1.37, command: ["sleep", "3600"]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: env-names}
data: {data-1: value-1, DATA_2: value-2}
---
apiVersion: v1
kind: Pod
metadata: {name: envfrom}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: registry.k8s.io/e2e-test-images/busybox:1.36.1-1
    command: [sh, -c, env]
    envFrom: [{configMapRef: {name: env-names}, prefix: p_}, {configMapRef: {name: env-names}, prefix: "1-"}]
`

// TestNode20KubeletBehaviour: emptyDir medium Memory is a tmpfs; a secret with
// defaultMode 0440 and an fsGroup is -r--r----- owned by the group; subPathExpr expands
// the container's variables and refuses '..' with CreateContainerConfigError while the
// pod stays Pending; a succeeded init container is Ready; FallbackToLogsOnError takes
// the log's exact bytes and a non-root container writes its message at its own path;
// postStart hooks run (a failing one is FailedPostStartHook); safe sysctls apply and
// /bin/sysctl and /agnhost-2 exist as in the e2e images, whose busybox sh passes on
// variables that are no shell names (envFrom data-1, prefix 1-); the nonewprivs image's setuid
// program gains root only with allowPrivilegeEscalation; an updated
// activeDeadlineSeconds fails the pod with DeadlineExceeded.
func TestNode20KubeletBehaviour(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	deletePodsAtEnd(t, s, ns)
	c.apply(t, ns, node20Pods)

	// jsonpath reads one field of a pod.
	jsonpath := func(pod, path string) string {
		out, _, _ := s.kubectl(t, "", "get", "pod", pod, "-n", ns, "-o", "jsonpath="+path)
		return out
	}
	// completed waits for pod to end with phase and returns its log.
	completed := func(t *testing.T, pod, phase string) string {
		t.Helper()
		eventually(t, 90*time.Second, "pod "+pod+" "+phase, func() (bool, string) {
			got := jsonpath(pod, "{.status.phase}")
			return got == phase, got
		})
		return s.must(t, "logs", pod, "-n", ns)
	}

	t.Run("tmpfs emptyDir and read-only secret with fsGroup", func(t *testing.T) {
		got := completed(t, "volumes", "Succeeded")
		if want := "tmpfs\n2777\n-r--r----- 1001\nvalue-1"; got != want {
			t.Errorf("output %q, want %q (tmpfs mount, its mode with the fsGroup's setgid, the secret file's mode and group, its content)", got, want)
		}
	})
	t.Run("subPathExpr", func(t *testing.T) {
		if got := completed(t, "subpath", "Succeeded"); got != "0\n" {
			t.Errorf("output %q: the file written in the subPath is not at mypath/subpath of the volume", got)
		}
		eventually(t, 60*time.Second, "backsteps waiting with CreateContainerConfigError", func() (bool, string) {
			got := jsonpath("backsteps", "{.status.phase} {.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}")
			return got == "Pending CreateContainerConfigError: unable to provision SubPath `..`: must not contain '..'", got
		})
	})
	t.Run("init container Ready once succeeded", func(t *testing.T) {
		c.waitReady(t, ns, "inits")
		if got := jsonpath("inits", "{.status.initContainerStatuses[0].ready} {.status.initContainerStatuses[0].state.terminated.reason}"); got != "true Completed" {
			t.Errorf("init1: ready and reason %q, want true Completed", got)
		}
	})
	t.Run("termination messages", func(t *testing.T) {
		completed(t, "fallback", "Failed")
		if got := jsonpath("fallback", "{.status.containerStatuses[0].state.terminated.message}"); got != "DONE" {
			t.Errorf("FallbackToLogsOnError message %q, want DONE", got)
		}
		completed(t, "custom-message", "Succeeded")
		if got := jsonpath("custom-message", "{.status.containerStatuses[0].state.terminated.message}"); got != "DONE" {
			t.Errorf("message at a custom path as user 1000: %q, want DONE", got)
		}
	})
	t.Run("postStart", func(t *testing.T) {
		eventually(t, 60*time.Second, "the postStart hook's file read by the container", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "logs", "poststart", "-n", ns)
			return out == "poststart ran\n", out
		})
		eventually(t, 60*time.Second, "FailedPostStartHook event and the container killed", func() (bool, string) {
			ev, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=poststart-fails,reason=FailedPostStartHook", "-o", "jsonpath={.items[*].message}")
			phase := jsonpath("poststart-fails", "{.status.phase}")
			return ev == "PostStartHook failed" && phase == "Failed", ev + " / " + phase
		})
	})
	t.Run("sysctl and the e2e images' paths", func(t *testing.T) {
		// The ConfigMap specs' check: a variable whose name is no shell name reaches
		// what the e2e busybox image's sh runs.
		if got := completed(t, "envfrom", "Succeeded"); !strings.Contains(got, "p_data-1=value-1\n") || !strings.Contains(got, "p_DATA_2=value-2\n") ||
			!strings.Contains(got, "1-data-1=value-1\n") {
			t.Errorf("env through sh in the e2e busybox image:\n%s", got)
		}
		if got := completed(t, "sysctl", "Succeeded"); got != "kernel.shm_rmid_forced = 1\n" {
			t.Errorf("sysctl output %q", got)
		}
		if got := completed(t, "entrypoint", "Succeeded"); !strings.Contains(got, "[/agnhost-2 entrypoint-tester override arguments]") {
			t.Errorf("entrypoint-tester output %q", got)
		}
	})
	t.Run("no_new_privs", func(t *testing.T) {
		if got := completed(t, "nnp-false", "Succeeded"); got != "Effective uid: 1000\n" {
			t.Errorf("allowPrivilegeEscalation false: %q, want the setuid program kept at uid 1000", got)
		}
		if got := completed(t, "nnp-true", "Succeeded"); got != "Effective uid: 0\n" {
			t.Errorf("allowPrivilegeEscalation true: %q, want the setuid program at uid 0", got)
		}
	})
	t.Run("activeDeadlineSeconds updated", func(t *testing.T) {
		c.waitReady(t, ns, "deadline")
		s.must(t, "patch", "pod", "deadline", "-n", ns, "-p", `{"spec":{"activeDeadlineSeconds":2}}`)
		eventually(t, 60*time.Second, "pod Failed with DeadlineExceeded", func() (bool, string) {
			got := jsonpath("deadline", "{.status.phase} {.status.reason}")
			return got == "Failed DeadlineExceeded", got
		})
	})
}

// TestNode20WebSockets: exec and log over WebSockets through the API server with the
// protocols the Pods conformance specs dial: channel.k8s.io for exec (stdout on channel
// 1) and binary.k8s.io for the log.
func TestNode20WebSockets(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	deletePodsAtEnd(t, s, ns)
	c.apply(t, ns, `apiVersion: v1
kind: Pod
metadata: {name: ws}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: busybox:1.37, command: [/bin/sh, -c, "echo container is alive; sleep 600"]}
`)
	c.waitReady(t, ns, "ws")
	cfg := s.restConfig(t)
	base := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/namespaces/" + ns + "/pods/ws/"

	exec := dialWebSocket(t, cfg, base+"exec?command=echo&command=remote+execution+test&container=main&stderr=1&stdout=1", "channel.k8s.io")
	var stdout bytes.Buffer
	for _, msg := range receiveWebSocket(t, exec) {
		if len(msg) > 1 && msg[0] != 1 {
			t.Fatalf("message on channel %d: %q", msg[0], msg[1:])
		}
		if len(msg) > 1 {
			stdout.Write(msg[1:])
		}
	}
	if stdout.String() != "remote execution test\n" {
		t.Errorf("exec stdout %q", stdout.String())
	}

	eventually(t, 30*time.Second, "the log over a websocket", func() (bool, string) {
		var log bytes.Buffer
		for _, msg := range receiveWebSocket(t, dialWebSocket(t, cfg, base+"log?container=main", "binary.k8s.io")) {
			log.Write(msg)
		}
		return log.String() == "container is alive\n", log.String()
	})
}

// dialWebSocket opens a WebSocket to the API server URL u with the admin credentials
// of cfg, as the conformance framework's OpenWebSocketForURL does.
func dialWebSocket(t *testing.T, cfg *rest.Config, u, protocol string) *websocket.Conn {
	t.Helper()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Scheme = map[string]string{"https": "wss", "http": "ws"}[pu.Scheme]
	wsCfg, err := websocket.NewConfig(pu.String(), "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	wsCfg.TlsConfig = tlsConfig
	wsCfg.Protocol = []string{protocol}
	if cfg.BearerToken != "" {
		wsCfg.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	ws, err := websocket.DialConfig(wsCfg)
	if err != nil {
		t.Fatalf("websocket to %s with %s: %v", u, protocol, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// receiveWebSocket reads messages until the server closes the connection.
func receiveWebSocket(t *testing.T, ws *websocket.Conn) [][]byte {
	t.Helper()
	var msgs [][]byte
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			if errors.Is(err, io.EOF) {
				return msgs
			}
			t.Fatalf("receiving: %v", err)
		}
		msgs = append(msgs, msg)
	}
}

// deletePodsAtEnd deletes the pods of ns when the test ends and waits until they are
// gone, before the namespace's own deletion: the next test on the shared cluster then
// finds the agents idle (TestStreamDroppedClientLeaksNothing counts their threads).
func deletePodsAtEnd(t *testing.T, s *server, ns string) {
	t.Cleanup(func() {
		if out, errOut, err := s.kubectl(t, "", "delete", "pods", "--all", "-n", ns, "--grace-period=1", "--timeout=50s"); err != nil {
			t.Logf("deleting the pods of %s: %v\n%s%s", ns, err, out, errOut)
		}
	})
}
