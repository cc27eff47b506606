// Package storagetest gives the storage tests of the CDI agents (import,
// upload, `converge image-upload`) what they share: a real hostpath CSI
// driver with one pool, and a CSI PersistentVolume of it bound to a PVC
// the way the external provisioner and the PV controller would, for tests
// that run neither.
package storagetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// RequireTool takes a binary name and the Debian package that has it. When
// the binary is not on PATH it fails t if CONVERGE_REQUIRE_NODEPLANE=1
// (CI) and skips t otherwise.
func RequireTool(t testing.TB, name, debPackage string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatalf("%s not on PATH (Debian package %s) and CONVERGE_REQUIRE_NODEPLANE=1", name, debPackage)
		}
		t.Skipf("%s not on PATH: install %s", name, debPackage)
	}
}

// StartDriver starts the hostpath CSI driver of nodeID on a socket in a
// temporary directory with one pool named poolName in another temporary
// directory, and gives the driver and the pool. The driver is closed at
// t's cleanup.
func StartDriver(t testing.TB, nodeID, poolName string) (*hostpath.Driver, hostpath.Pool) {
	t.Helper()
	pool := hostpath.Pool{Name: poolName, Path: t.TempDir()}
	o := hostpath.DefaultOptions()
	o.Endpoint, o.NodeID, o.Pools = "unix://"+filepath.Join(t.TempDir(), "csi.sock"), nodeID, []hostpath.Pool{pool}
	d, err := hostpath.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, pool
}

// Volume is a volume of a hostpath pool on a node, as the provisioner
// names it ("pvc-" + the claim's UID).
type Volume struct {
	// ID is the volume's handle and its PersistentVolume's name.
	ID string
	// Size is the capacity asked for and recorded on the PV and PVC.
	Size resource.Quantity
	// Pool is the hostpath pool the volume is made in.
	Pool hostpath.Pool
	// Node is the node the PV's node affinity names.
	Node string
	// Block asks for a block volume instead of a filesystem.
	Block bool
}

// Create makes the volume through d's CSI CreateVolume (single-node
// writer, in v.Pool) and gives its error, naming the volume.
func (v Volume) Create(ctx context.Context, d *hostpath.Driver) error {
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	if v.Block {
		capability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	}
	if _, err := d.Controller().CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: v.Size.Value()},
		VolumeCapabilities: []*csi.VolumeCapability{capability},
		Parameters:         map[string]string{hostpath.ParameterStoragePool: v.Pool.Name},
	}); err != nil {
		return fmt.Errorf("volume %s: CreateVolume: %w", v.ID, err)
	}
	return nil
}

// PV gives the volume's PersistentVolume: capacity v.Size, ReadWriteOnce,
// the hostpath driver's CSI source with the pool attribute, and node
// affinity to v.Node. Callers add a claimRef, class or reclaim policy.
func (v Volume) PV() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: v.ID},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: v.Size},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: hostpath.DefaultDriverName, VolumeHandle: v.ID,
				VolumeAttributes: map[string]string{hostpath.ParameterStoragePool: v.Pool.Name},
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostpath.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v.Node}}},
			}}}},
		},
	}
}

// DataVolumeClaim gives the PVC of the DataVolume namespace/name with uid
// as the DataVolume controller makes it (controlled by the DataVolume,
// same name), ReadWriteOnce, asking for v.Size and bound to v's PV by
// spec.volumeName.
func (v Volume) DataVolumeClaim(namespace, name string, uid types.UID) *corev1.PersistentVolumeClaim {
	yes := true
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: name, UID: uid, Controller: &yes}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: v.Size}},
			VolumeName:  v.ID,
		},
	}
}

// MarkBound sets pvc's status to Bound with its access modes and capacity
// size through the status subresource, as the PV controller does, and
// gives the API server's error, naming the claim.
func MarkBound(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	if err := c.Status().Update(ctx, pvc); err != nil {
		return fmt.Errorf("PVC %s/%s: binding: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}
