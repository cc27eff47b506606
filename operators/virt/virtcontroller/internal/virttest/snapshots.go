package virttest

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
)

// HostpathDriver is the CSI driver of HostpathClass.
const HostpathDriver = "kubevirt.io.hostpath-provisioner"

// NewWithSnapshots is New with snapshots: the manager's scheme also
// knows snapshot.kubevirt.io/v1beta1 and snapshot.storage.k8s.io/v1, the
// engine's VirtualMachineSnapshot, VirtualMachineSnapshotContent and
// VirtualMachineRestore CRDs and the pinned VolumeSnapshot CRDs
// (internal/snapshotcrds) are installed, and so are the StorageClass
// HostpathClass (HostpathDriver, Immediate binding) and a
// VolumeSnapshotClass "hostpath-snapshots" of HostpathDriver.
func NewWithSnapshots(t *testing.T, setups ...func(ctrl.Manager) error) *Env {
	t.Helper()
	cp, c, scheme := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme, cdiv1.AddToScheme, snapshotv1.AddToScheme, snapv1.AddToScheme)
	ctx := context.Background()
	crdtest.Install(t, c, "virtualmachines", "virtualmachineinstances", "datavolumes",
		"virtualmachinesnapshots", "virtualmachinesnapshotcontents", "virtualmachinerestores",
		"volumesnapshots", "volumesnapshotcontents", "volumesnapshotclasses")
	controlplane.RunManagerForTest(t, cp, scheme, setups...)
	e := &Env{C: c, NS: Namespace}
	immediate := storagev1.VolumeBindingImmediate
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.NS}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: HostpathClass}, Provisioner: HostpathDriver, VolumeBindingMode: &immediate}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-snapshots"}, Driver: HostpathDriver,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete}); err != nil {
		t.Fatal(err)
	}
	return e
}

// VolumeSnapshot waits up to 30 s for the VolumeSnapshot name and gives it.
func (e *Env) VolumeSnapshot(t *testing.T, name string) *snapv1.VolumeSnapshot {
	t.Helper()
	vs := &snapv1.VolumeSnapshot{}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return e.C.Get(context.Background(), types.NamespacedName{Namespace: e.NS, Name: name}, vs) == nil
	})
	return vs
}

// CutVolumeSnapshot does what the snapshot controller and csi-snapshotter
// do for the existing VolumeSnapshot name once the CSI driver cut it: its
// status gets a bound content name, a creation time, readyToUse and
// restoreSize size.
func (e *Env) CutVolumeSnapshot(t *testing.T, name, size string) {
	t.Helper()
	ctx := context.Background()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vs := e.VolumeSnapshot(t, name)
		ready, rs, now, content := true, resource.MustParse(size), metav1.Now(), "snapcontent-"+name
		vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content, CreationTime: &now, ReadyToUse: &ready, RestoreSize: &rs}
		return e.C.Status().Update(ctx, vs)
	}); err != nil {
		t.Fatalf("VolumeSnapshot %s: %v", name, err)
	}
}
