package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// roleDaemonSets are the DaemonSets the native operators run for the
// example, all in hcNamespace.
var roleDaemonSets = []string{"converge-vm-agent", "converge-bridge-marker", "converge-cdi-importer", "hostpath-provisioner-csi"}

// setOperators sets the example Sync's spec.operators ("" removes it),
// and spec.wait false with external (null, the default true, with "").
// Without an upstream operator on this cluster the health gates would
// hold the hpp stage behind a CDI that never turns healthy again, so the
// HostPathProvisioner would stay native; whether it does depends on a
// race between the Sync's health check and the native operator releasing
// the CDI's status. wait: false applies every stage.
func setOperators(t *testing.T, ctx context.Context, e *cluster.Env, mode string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"operators":%q,"wait":false}}`, mode)
	if mode == "" {
		patch = `{"spec":{"operators":null,"wait":null}}`
	}
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: syncName}}
	if err := e.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("setting the Sync's spec.operators to %q: %v", mode, err)
	}
}

// TestExternalMode: the Sync's spec.operators: external hands the operand
// CRs to the upstream operators. converge still derives them, now marked
// converge.dev/operator: external, and its native operators remove every
// role they ran (the node agents' DaemonSets, the hostpath CSIDriver and
// StorageClass) and the conditions they wrote; with no upstream operator
// on this cluster the Sync's Healthy condition is not True and its
// components name the KubeVirt without conditions.
// Back in native mode the roles return and the Sync is Ready.
func TestExternalMode(t *testing.T) {
	e, _, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)

	setOperators(t, ctx, e, v1alpha1.OperatorsExternal)
	restored := false
	defer func() {
		if !restored {
			setOperators(t, ctx, e, "")
		}
	}()

	eventually(t, 3*time.Minute, "the operand CRs are marked external", func() (bool, string) {
		for _, o := range []struct{ apiVersion, kind, ns, name string }{
			{"kubevirt.io/v1", "KubeVirt", hcNamespace, "kubevirt-" + hcName},
			{"cdi.kubevirt.io/v1beta1", "CDI", "", "cdi-" + hcName},
			{"networkaddonsoperator.network.kubevirt.io/v1", "NetworkAddonsConfig", "", "cluster"},
			{"hostpathprovisioner.kubevirt.io/v1beta1", "HostPathProvisioner", "", "hostpath-provisioner"},
		} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(o.apiVersion)
			u.SetKind(o.kind)
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: o.ns, Name: o.name}, u); err != nil {
				return false, fmt.Sprintf("%s %s: %v", o.kind, o.name, err)
			}
			if m := u.GetAnnotations()["converge.dev/operator"]; m != "external" {
				return false, fmt.Sprintf("%s %s: converge.dev/operator %q", o.kind, o.name, m)
			}
			if f := u.GetFinalizers(); len(f) > 0 {
				return false, fmt.Sprintf("%s %s: finalizers %v still there", o.kind, o.name, f)
			}
			// What converge's operator reported is gone: nothing of it runs.
			if conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); len(conds) > 0 {
				return false, fmt.Sprintf("%s %s: conditions %v still there", o.kind, o.name, conds)
			}
		}
		return true, ""
	})

	eventually(t, 3*time.Minute, "no native role runs", func() (bool, string) {
		var left []string
		for _, name := range roleDaemonSets {
			err := e.Client.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: name}, &appsv1.DaemonSet{})
			if err == nil {
				left = append(left, "DaemonSet "+name)
			}
		}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: csiDriverName}, &storagev1.CSIDriver{}); err == nil {
			left = append(left, "CSIDriver "+csiDriverName)
		}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: storageClass}, &storagev1.StorageClass{}); err == nil {
			left = append(left, "StorageClass "+storageClass)
		}
		for _, name := range roleDaemonSets {
			pods, err := podsOf(ctx, e.Clientset, hcNamespace, "k8s-app="+name)
			if err != nil {
				return false, err.Error()
			}
			if len(pods) > 0 {
				left = append(left, fmt.Sprintf("%d pods of %s", len(pods), name))
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})

	eventually(t, 3*time.Minute, "the Sync reports the upstream operators missing", func() (bool, string) {
		s, err := getSync(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		healthy := apimeta.FindStatusCondition(s.Status.Conditions, "Healthy")
		if healthy == nil || healthy.Status == metav1.ConditionTrue {
			return false, fmt.Sprintf("Healthy %+v", healthy)
		}
		for _, c := range s.Status.Components {
			if c.Name == "virt" && c.Health != "Healthy" && strings.Contains(c.Message, "KubeVirt") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("components %+v", s.Status.Components)
	})

	// converge-controller, whose gated roles ended with the last native
	// CR, is running again.
	eventually(t, 2*time.Minute, "converge-controller is ready", func() (bool, string) {
		p, err := controllerPod(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		return podReady(p), describePod(p)
	})

	setOperators(t, ctx, e, "")
	restored = true
	waitSyncReady(t, ctx, e)
}
