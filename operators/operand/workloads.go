package operand

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// workloadKinds are the kinds whose readiness the status is computed
// from; the pipeline does not wait for them (health rule "none").
var workloadKinds = map[string]bool{"DaemonSet": true, "Deployment": true}

// workloadGenerations reads through r (the API server, not a cache) the
// metadata.generation of the DaemonSets and Deployments of inv, by
// inventory ID; one not found is left out.
func workloadGenerations(ctx context.Context, r client.Reader, inv *v1alpha1.Inventory) (map[string]int64, error) {
	out := map[string]int64{}
	if inv == nil {
		return out, nil
	}
	for _, e := range inv.Entries {
		ns, name, gk, err := inventory.ParseID(e.ID)
		if err != nil || gk.Group != "apps" || !workloadKinds[gk.Kind] {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind(gk.Kind)
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading %s %s/%s: %w", gk.Kind, ns, name, err)
		}
		out[e.ID] = u.GetGeneration()
	}
	return out, nil
}

// specChanged reports whether a workload of after is new or has another
// generation than in before: its spec changed (a generation moves only
// with the spec, never with status or pods, unlike an apply's change set,
// which reports a DaemonSet "configured" when its status moved between
// the dry run and the read).
func specChanged(before, after map[string]int64) bool {
	for id, g := range after {
		if b, ok := before[id]; !ok || b != g {
			return true
		}
	}
	return false
}

// withTemplateLabels gives objs with labels added to the pod template of
// every DaemonSet and Deployment, so that their pods carry the owner
// labels too: the operator's cache selects its pods by them.
func withTemplateLabels(objs []*unstructured.Unstructured, labels map[string]string) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if workloadKinds[o.GetKind()] {
			o = o.DeepCopy()
			l, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			if l == nil {
				l = map[string]string{}
			}
			for k, v := range labels {
				l[k] = v
			}
			_ = unstructured.SetNestedStringMap(o.Object, l, "spec", "template", "metadata", "labels")
		}
		out = append(out, o)
	}
	return out
}

// readWorkloads reads, through r, the DaemonSets and Deployments of inv
// and their pods (the workload's selector, in its namespace), and,
// through events, why a workload that wants pods has none. A workload not
// found is reported as such.
func readWorkloads(ctx context.Context, r, events client.Reader, inv *v1alpha1.Inventory) ([]Workload, error) {
	if inv == nil {
		return nil, nil
	}
	var out []Workload
	for _, e := range inv.Entries {
		ns, name, gk, err := inventory.ParseID(e.ID)
		if err != nil || gk.Group != "apps" || !workloadKinds[gk.Kind] {
			continue
		}
		key := client.ObjectKey{Namespace: ns, Name: name}
		var w Workload
		switch gk.Kind {
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			if err := r.Get(ctx, key, ds); err != nil {
				if apierrors.IsNotFound(err) {
					out = append(out, Workload{Kind: gk.Kind, Namespace: ns, Name: name})
					continue
				}
				return nil, fmt.Errorf("reading DaemonSet %s: %w", key, err)
			}
			pods, err := podsOf(ctx, r, ns, ds.Spec.Selector)
			if err != nil {
				return nil, fmt.Errorf("pods of DaemonSet %s: %w", key, err)
			}
			w = DaemonSetWorkload(ds, pods)
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := r.Get(ctx, key, d); err != nil {
				if apierrors.IsNotFound(err) {
					out = append(out, Workload{Kind: gk.Kind, Namespace: ns, Name: name})
					continue
				}
				return nil, fmt.Errorf("reading Deployment %s: %w", key, err)
			}
			pods, err := podsOf(ctx, r, ns, d.Spec.Selector)
			if err != nil {
				return nil, fmt.Errorf("pods of Deployment %s: %w", key, err)
			}
			w = DeploymentWorkload(d, pods)
		}
		if w.Desired > 0 && len(w.Pods) == 0 {
			if w.CreateError, err = createError(ctx, events, w); err != nil {
				return nil, err
			}
		}
		out = append(out, w)
	}
	return out, nil
}

// createError gives the reason and message of the latest FailedCreate
// event of w ("" when none), what its controller records when the API
// server refuses its pods (a missing PriorityClass, a quota, an
// admission webhook).
func createError(ctx context.Context, r client.Reader, w Workload) (string, error) {
	list := &corev1.EventList{}
	if err := r.List(ctx, list, client.InNamespace(w.Namespace), client.MatchingFields{
		"involvedObject.kind": w.Kind, "involvedObject.name": w.Name, "reason": "FailedCreate"}); err != nil {
		return "", fmt.Errorf("events of %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
	}
	var latest *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if latest == nil || eventTime(e).After(eventTime(latest)) {
			latest = e
		}
	}
	if latest == nil {
		return "", nil
	}
	return latest.Reason + ": " + latest.Message, nil
}

// eventTime is when e last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// podsOf lists the pods of namespace matching sel.
func podsOf(ctx context.Context, r client.Reader, namespace string, sel *metav1.LabelSelector) ([]corev1.Pod, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return nil, err
	}
	return list.Items, nil
}
