package noderestriction_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
)

func node(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func patchNode(c client.Client, name, patch string) func(context.Context) error {
	return func(ctx context.Context) error { return mergePatch(ctx, c, node(name), patch) }
}

func patchNodeStatus(c client.Client, name, patch string) func(context.Context) error {
	return func(ctx context.Context) error { return statusPatch(ctx, c, node(name), patch) }
}

// mergePatch sends patch as a JSON merge patch of obj.
func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch string, opts ...client.PatchOption) error {
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)), opts...)
}

// patchPV sends patch as a JSON merge patch of the PersistentVolume name,
// as the resizer grows a PV's capacity.
func patchPV(c client.Client, name, patch string) func(context.Context) error {
	return func(ctx context.Context) error {
		return mergePatch(ctx, c, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch)
	}
}

// claimCapacity sets status.capacity of claim to size with an update of
// its status subresource, as the resizer's updateStatus (UpdateStatus).
func claimCapacity(e *env, c client.Client, claim *corev1.PersistentVolumeClaim, size string) func(context.Context) error {
	return func(ctx context.Context) error {
		cur := &corev1.PersistentVolumeClaim{}
		if err := e.admin.Get(ctx, client.ObjectKeyFromObject(claim), cur); err != nil {
			return err
		}
		cur.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resourceQuantity(size)}
		return c.Status().Update(ctx, cur)
	}
}

// statusPatch sends patch as a JSON merge patch of obj's status
// subresource.
func statusPatch(ctx context.Context, c client.Client, obj client.Object, patch string, opts ...client.SubResourcePatchOption) error {
	return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)), opts...)
}

// vmi creates a VMI in vmNS bound to node as the VMI scheduler binds it
// (label kubevirt.io/nodeName, status.nodeName) and gives it as created.
func vmi(t *testing.T, e *env, name, node string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	ctx := context.Background()
	v := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: vmNS, Name: name, Labels: map[string]string{kubevirtv1.NodeNameLabel: node}},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resourceQuantity("64Mi")}},
		}},
	}
	must(t, e.admin.Create(ctx, v))
	v.Status = kubevirtv1.VirtualMachineInstanceStatus{NodeName: node, Phase: kubevirtv1.Pending}
	must(t, e.admin.Status().Update(ctx, v))
	return v
}

// store stores, through the VM agent's APISource, a report of v Scheduled
// on node, and gives an error when it is still pending (refused).
func store(src *agent.APISource, v *kubevirtv1.VirtualMachineInstance, node string) error {
	st := *v.Status.DeepCopy()
	st.NodeName, st.Phase = node, kubevirtv1.Scheduled
	before := src.Pending()
	src.Store(agent.Report{Namespace: v.Namespace, Name: v.Name, UID: v.UID, Status: st})
	if n := src.Pending(); n > before {
		return errString("the report is still pending: the API server refused it")
	}
	return nil
}

// pv is a PersistentVolume of CSI driver on node, as the provisioner
// builds it (nodeplane/csi/provisioner buildPV: node affinity
// topology.hostpath.csi/node In [node]).
func pv(name, driver, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.HostpathTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// pvc creates a PVC in vmNS that kube-scheduler selected node for.
func pvc(t *testing.T, e *env, name, node string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: vmNS, Name: name, Annotations: map[string]string{"volume.kubernetes.io/selected-node": node}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("1Gi")}},
		},
	}
	must(t, e.admin.Create(context.Background(), c))
	return c
}

// finalizer adds the library's PV finalizer with a strategic merge patch,
// as sig-storage-lib-external-provisioner's handleProtectionFinalizer.
func finalizer(c client.Client, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		p, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": []string{"external-provisioner.volume.kubernetes.io/finalizer"}}})
		return c.Patch(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.StrategicMergePatchType, p))
	}
}

// reschedule removes the selected-node annotation from claim (and sets
// labels, when given) with an update, as the library's
// rescheduleProvisioning.
func reschedule(c client.Client, claim *corev1.PersistentVolumeClaim, labels map[string]string) func(context.Context) error {
	return func(ctx context.Context) error {
		cur := claim.DeepCopy()
		delete(cur.Annotations, "volume.kubernetes.io/selected-node")
		if labels != nil {
			cur.Labels = labels
		}
		return c.Update(ctx, cur)
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func ptr[T any](v T) *T { return &v }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

type errString string

func (e errString) Error() string { return string(e) }

func orOK(err error) any {
	if err == nil {
		return "ok"
	}
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
