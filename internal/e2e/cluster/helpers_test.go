package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// eventually polls cond every 250 ms until it holds, failing t with
// cond's last word after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// podReady tells whether p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// describePod gives a pod's phase, conditions and container states in a
// line, for failures.
func describePod(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s/%s phase %s", p.Namespace, p.Name, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, ", %s=%s", c.Type, c.Status)
		if c.Message != "" {
			fmt.Fprintf(&b, " (%s)", c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "; container %s ready %v restarts %d", cs.Name, cs.Ready, cs.RestartCount)
		switch s := cs.State; {
		case s.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %s", s.Waiting.Reason, s.Waiting.Message)
		case s.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s (exit %d): %s", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message)
		case s.Running != nil:
			fmt.Fprintf(&b, " running since %s", s.Running.StartedAt.Format(time.RFC3339))
		}
	}
	return b.String()
}

// podLog gives the log of a pod's container (previous: of its last
// terminated run).
func podLog(ctx context.Context, cs kubernetes.Interface, ns, pod, container string, previous bool) (string, error) {
	b, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
	return string(b), err
}

// podsOf lists the pods of namespace ns matching selector.
func podsOf(ctx context.Context, cs kubernetes.Interface, ns, selector string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
