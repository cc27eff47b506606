package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/cli"
)

// reason returns the reason of the Sync's condition typ, "" when absent.
func reason(s *v1alpha1.Sync, typ string) string {
	if c := apimeta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
		return c.Reason
	}
	return ""
}

// ready reports whether the Sync is Ready=True for its current spec.
func ready(s *v1alpha1.Sync) bool {
	return s.Status.ObservedGeneration == s.Generation && apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition)
}

// allHealthy reports whether the Sync lists components and every one is
// Healthy.
func allHealthy(s *v1alpha1.Sync) bool {
	for _, c := range s.Status.Components {
		if c.Health != "Healthy" {
			return false
		}
	}
	return len(s.Status.Components) > 0
}

// waitEvent waits up to 10s for an Event with reason on the Sync: the
// controller's event recorder writes them asynchronously.
func (d *demo) waitEvent(ctx context.Context, reason string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := &corev1.EventList{}
		if err := d.c.List(ctx, list, client.InNamespace(cli.DefaultNamespace)); err != nil {
			return fmt.Errorf("listing Events in %s: %w", cli.DefaultNamespace, err)
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == v1alpha1.SyncKind && e.InvolvedObject.Name == syncName && e.Reason == reason {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Sync %s/%s: no %s event within 10s", cli.DefaultNamespace, syncName, reason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kubeVirtObject is the KubeVirt CR converge derives from the example HC.
func kubeVirtObject() *unstructured.Unstructured {
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	kv.SetNamespace(hcNamespace)
	kv.SetName(kubeVirt)
	return kv
}

// kubeVirtField reads the KubeVirt CR from the API server and returns the
// field at path as text ("<unset>" when absent).
func (d *demo) kubeVirtField(ctx context.Context, path ...string) (string, error) {
	kv := kubeVirtObject()
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(kv), kv); err != nil {
		return "", fmt.Errorf("KubeVirt %s/%s: %w", hcNamespace, kubeVirt, err)
	}
	v, ok, err := unstructured.NestedFieldNoCopy(kv.Object, path...)
	if err != nil || !ok {
		return "<unset>", err
	}
	return fmt.Sprint(v), nil
}
