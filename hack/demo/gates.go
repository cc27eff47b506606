package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// gates follows the Sync from the install until it is Ready with every
// component Healthy (at most 5 minutes), printing a line, with the
// seconds since the install began, whenever the Sync's Ready condition,
// a component's health or a pod of hcNamespace (the operators' roles)
// changes. It then shows `converge get syncs -A` and `converge tree`.
func (d *demo) gates(ctx context.Context) error {
	say("health gates: a component is applied once its dependencies are healthy, and is healthy once its operator's pods are ready")
	note("polling the Sync's status.components and the pods in %s every second; +s counts from `converge install`", hcNamespace)
	w := newChangeLog(d.installed)
	deadline := time.Now().Add(5 * time.Minute)
	var last []v1alpha1.ComponentStatus
	for {
		s, err := d.getSync(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil {
			last = s.Status.Components
			if r := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); r != nil {
				state := fmt.Sprintf("%-13s Ready=%s %s", "Sync "+syncName, r.Status, r.Reason)
				if r.Status == metav1.ConditionFalse {
					// A failure is retried; its message says why.
					state += "\n             " + shorten(r.Message, 400)
				}
				w.set("Sync", state)
			}
			for _, c := range s.Status.Components {
				w.set("component "+c.Name, fmt.Sprintf("%-13s %-11s %s", "component "+c.Name, c.Health, shorten(c.Message, 150)))
			}
		}
		pods := &corev1.PodList{}
		if err := d.env.Client.List(ctx, pods, client.InNamespace(hcNamespace)); err != nil {
			return fmt.Errorf("listing the pods in %s: %w", hcNamespace, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			w.set("pod "+p.Name, fmt.Sprintf("pod %s (%s): %s", p.Name, owner(p), podState(p)))
		}
		if err == nil && synced(s) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Sync %s/%s: not Ready with every component Healthy within 5 minutes of the install (components %+v)", syncNS, syncName, last)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	took := time.Since(d.installed)
	d.record("converge install → Sync Ready, all Healthy", took)
	note("Sync Ready with every component Healthy %s after `converge install` began", round(took))
	if err := d.show(ctx, "get", "syncs", "-A"); err != nil {
		return err
	}
	return d.show(ctx, "tree", syncName, "-n", syncNS)
}

// getSync reads the Sync.
func (d *demo) getSync(ctx context.Context) (*v1alpha1.Sync, error) {
	s := &v1alpha1.Sync{}
	if err := d.env.Client.Get(ctx, client.ObjectKey{Namespace: syncNS, Name: syncName}, s); err != nil {
		return nil, fmt.Errorf("reading Sync %s/%s: %w", syncNS, syncName, err)
	}
	return s, nil
}

// synced reports whether s is Ready for its current spec at the revision
// it last attempted, with every component it lists Healthy.
func synced(s *v1alpha1.Sync) bool {
	if s.Status.ObservedGeneration != s.Generation || !apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition) ||
		s.Status.LastAppliedRevision != s.Status.LastAttemptedRevision || len(s.Status.Components) == 0 {
		return false
	}
	for _, c := range s.Status.Components {
		if c.Health != "Healthy" {
			return false
		}
	}
	return true
}

// changeLog prints a keyed state when it differs from the key's last
// one, with the seconds since start.
type changeLog struct {
	start time.Time
	last  map[string]string
}

// newChangeLog gives a changeLog counting from start.
func newChangeLog(start time.Time) *changeLog {
	return &changeLog{start: start, last: map[string]string{}}
}

// set records state for key, printing it when it changed.
func (l *changeLog) set(key, state string) {
	if l.last[key] == state {
		return
	}
	l.last[key] = state
	fmt.Printf("  +%5.1fs  %s\n", time.Since(l.start).Seconds(), strings.TrimSpace(state))
}

// owner names the controller of p ("DaemonSet converge-vm-agent"), or
// "no controller".
func owner(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.Kind + " " + o.Name
		}
	}
	return "no controller"
}

// podState says where p is in its start: Ready, or its phase with the
// reasons its containers wait for.
func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		state := "terminating"
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				state += fmt.Sprintf(", %s exited %d", cs.Name, t.ExitCode)
			}
		}
		return state
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return "Ready"
		}
	}
	var waiting []string
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			waiting = append(waiting, cs.Name+" "+w.Reason)
		}
	}
	sort.Strings(waiting)
	state := string(p.Status.Phase)
	if p.Status.Phase == corev1.PodRunning {
		state = "Running, not ready"
	}
	if len(waiting) > 0 {
		state += " (" + strings.Join(waiting, ", ") + ")"
	}
	return state
}

// shorten gives s on one line, cut to n runes with "…".
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
