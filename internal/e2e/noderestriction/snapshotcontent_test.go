package noderestriction_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The hostpath csi-snapshotter's policy messages (components/hpp #Driver).
const (
	otherContent = "may change only the VolumeSnapshotContents of kubevirt.io.hostpath-provisioner labelled snapshot.storage.kubernetes.io/managed-by with its node"
	contentMeta  = "may change only the status of a VolumeSnapshotContent, its snapshot.storage.kubernetes.io/volumesnapshot-being-created annotation, and remove its finalizers"
)

// contentFinalizer is the snapshot controller's finalizer on a bound
// VolumeSnapshotContent (external-snapshotter pkg/utils
// VolumeSnapshotContentFinalizer), which the csi-snapshotter removes once
// it deleted the snapshot.
const contentFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"

// content creates, as the snapshot controller does, a dynamic
// VolumeSnapshotContent name of driver labelled for node's csi-snapshotter,
// with the bound-protection finalizer, and gives it.
func content(t *testing.T, e *env, name, driver, node string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"snapshot.storage.kubernetes.io/managed-by": node},
			"finalizers": []any{contentFinalizer}},
		"spec": map[string]any{"deletionPolicy": "Delete", "driver": driver,
			"source":            map[string]any{"volumeHandle": "vol-" + name},
			"volumeSnapshotRef": map[string]any{"name": "snap-" + name, "namespace": vmNS}},
	}}
	must(t, e.admin.Create(context.Background(), u))
	return u
}

// contentRef is an object naming the VolumeSnapshotContent name, to patch.
func contentRef(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("snapshot.storage.k8s.io/v1")
	u.SetKind("VolumeSnapshotContent")
	u.SetName(name)
	return u
}

// patchContent sends patch as a JSON merge patch of content name, as c.
func patchContent(c client.Client, name, patch string) func(context.Context) error {
	return func(ctx context.Context) error { return mergePatch(ctx, c, contentRef(name), patch) }
}

// patchContentStatus sends patch as a JSON merge patch of content name's
// status subresource, as c.
func patchContentStatus(c client.Client, name, patch string) func(context.Context) error {
	return func(ctx context.Context) error { return statusPatch(ctx, c, contentRef(name), patch) }
}

// contentSteps are the hostpath csi-snapshotter's requests (hp, on node A)
// on the VolumeSnapshotContents of node A, of node B and of another
// driver on node A: what nodeplane/csi/snapshotter (upstream's sidecar
// controller) writes on its own passes, the rest is refused.
func contentSteps(t *testing.T, e *env, hp client.Client) []step {
	content(t, e, "content-a", "kubevirt.io.hostpath-provisioner", nodeA)
	content(t, e, "content-b", "kubevirt.io.hostpath-provisioner", nodeB)
	content(t, e, "content-x", "other.csi.example.com", nodeA)
	being := `"snapshot.storage.kubernetes.io/volumesnapshot-being-created"`
	return []step{
		{"csi-snapshotter marks its content being created", patchContent(hp, "content-a", `{"metadata":{"annotations":{`+being+`:"yes"}}}`), ""},
		{"csi-snapshotter writes its content's status", patchContentStatus(hp, "content-a", `{"status":{"readyToUse":true,"snapshotHandle":"snap-1","restoreSize":1048576}}`), ""},
		{"csi-snapshotter unmarks its content", patchContent(hp, "content-a", `{"metadata":{"annotations":{`+being+`:null}}}`), ""},
		{"csi-snapshotter marks another node's content", patchContent(hp, "content-b", `{"metadata":{"annotations":{`+being+`:"yes"}}}`), otherContent},
		{"csi-snapshotter writes another node's content's status", patchContentStatus(hp, "content-b", `{"status":{"readyToUse":true}}`), otherContent},
		{"csi-snapshotter writes the status of another driver's content", patchContentStatus(hp, "content-x", `{"status":{"readyToUse":true}}`), otherContent},
		{"csi-snapshotter relabels its content", patchContent(hp, "content-a", `{"metadata":{"labels":{"snapshot.storage.kubernetes.io/managed-by":"node-b"}}}`), otherContent},
		{"csi-snapshotter changes its content's deletion policy", patchContent(hp, "content-a", `{"spec":{"deletionPolicy":"Retain"}}`), otherContent},
		{"csi-snapshotter annotates its content", patchContent(hp, "content-a", `{"metadata":{"annotations":{"example.com/x":"y"}}}`), contentMeta},
		{"csi-snapshotter adds a finalizer to its content", patchContent(hp, "content-a", `{"metadata":{"finalizers":["`+contentFinalizer+`","example.com/keep"]}}`), contentMeta},
		{"csi-snapshotter removes another node's content's finalizer", patchContent(hp, "content-b", `{"metadata":{"finalizers":null}}`), otherContent},
		{"csi-snapshotter removes its content's finalizer", patchContent(hp, "content-a", `{"metadata":{"finalizers":null}}`), ""},
		{"csi-snapshotter deletes its content", func(ctx context.Context) error { return hp.Delete(ctx, contentRef("content-a")) }, `cannot delete resource "volumesnapshotcontents"`},
	}
}

// checkContents checks that what the allowed content steps wrote is
// there and what the refused ones would have written is not.
func checkContents(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	a, b := contentRef("content-a"), contentRef("content-b")
	must(t, e.admin.Get(ctx, client.ObjectKeyFromObject(a), a))
	must(t, e.admin.Get(ctx, client.ObjectKeyFromObject(b), b))
	if ready, _, _ := unstructured.NestedBool(a.Object, "status", "readyToUse"); !ready {
		t.Errorf("content-a: readyToUse not written")
	}
	if len(a.GetFinalizers()) != 0 || len(a.GetAnnotations()) != 0 || a.GetLabels()["snapshot.storage.kubernetes.io/managed-by"] != nodeA {
		t.Errorf("content-a: finalizers %v annotations %v labels %v, want none, none and its node", a.GetFinalizers(), a.GetAnnotations(), a.GetLabels())
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(b.Object, "status"); ok || len(b.GetFinalizers()) != 1 {
		t.Errorf("content-b: status %v finalizers %v: a refused change is there", b.Object["status"], b.GetFinalizers())
	}
}
