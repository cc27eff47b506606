package bench_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/csi/snapshotter"
	"github.com/converge-dev/converge/operators/hostpath/snapshotcontroller"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/vmsnapshot"
)

// Shape of BenchmarkVMSnapshot's disk: a volume of snapDisk bytes whose
// disk.img holds snapData bytes of data.
const (
	snapDisk = 1 << 30
	snapData = 64 << 20
	snapNode = "node-1"
	snapNS   = "vms"
)

// BenchmarkVMSnapshot measures snapshot create → readyToUse on a real
// API server through the machinery converge deploys, with its default
// options: the snapshot controller (operators/hostpath/snapshotcontroller,
// upstream external-snapshotter's common controller, distributed
// snapshotting), the node's csi-snapshotter sidecar
// (nodeplane/csi/snapshotter) over the hostpath CSI driver's socket, and
// for a VirtualMachineSnapshot the VM snapshot controller
// (operators/virt/virtcontroller/vmsnapshot). The claim is a 1 GiB
// filesystem volume of the driver whose disk.img holds 64 MiB of data,
// bound to a PersistentVolume on the node; the VM is stopped (an offline
// snapshot) and that claim is its only disk. One op is, in turn, a
// VolumeSnapshot of the claim (the floor: the same CSI snapshot without
// the VM layer) and a VirtualMachineSnapshot of the VM, each created and
// polled every 10 ms until readyToUse, then deleted and waited for until
// gone (not timed). Metrics: vs-ms, vmsnapshot-ms (means per op) and the
// ratio vmsnapshot/vs.
func BenchmarkVMSnapshot(b *testing.B) {
	// upstream's controllers log every snapshot at level 0
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	env, c, scheme := controlplane.StartEnvForTest(b, kubevirtv1.AddToScheme, cdiv1.AddToScheme, snapshotv1.AddToScheme, snapv1.AddToScheme)
	crdtest.Install(b, c, "virtualmachines", "virtualmachineinstances", "datavolumes", "virtualmachinesnapshots", "virtualmachinesnapshotcontents",
		"volumesnapshots", "volumesnapshotcontents", "volumesnapshotclasses")
	controlplane.RunManagerForTest(b, env, scheme, func(mgr ctrl.Manager) error {
		if err := snapshotcontroller.Setup(mgr, snapshotcontroller.DefaultOptions()); err != nil {
			return err
		}
		return vmsnapshot.SetupWithManager(mgr, vmsnapshot.Options{})
	})
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)

	// The node's side: the driver on a socket, its sidecar.
	dir := b.TempDir()
	pool := filepath.Join(dir, "pool")
	opts := hostpath.DefaultOptions()
	opts.Endpoint, opts.NodeID = "unix://"+filepath.Join(dir, "csi.sock"), snapNode
	opts.Pools = []hostpath.Pool{{Name: "local", Path: pool}}
	d, err := hostpath.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	lis, err := d.Listen()
	if err != nil {
		b.Fatal(err)
	}
	go d.ServeListener(ctx, lis) //nolint:errcheck // ends with ctx
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	snaps, err := snapclientset.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	so := snapshotter.DefaultOptions()
	so.Client, so.Snapshots, so.Conn, so.NodeName = cs, snaps, conn, snapNode
	s, err := snapshotter.New(ctx, so)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })

	// The volume with its data, and what the cluster knows of it.
	vol, err := d.Controller().CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-data",
		CapacityRange: &csi.CapacityRange{RequiredBytes: snapDisk},
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}})
	if err != nil {
		b.Fatal(err)
	}
	writeSnapDisk(b, filepath.Join(pool, vol.GetVolume().GetVolumeId(), "data", "disk.img"))
	snapObjects(b, c, vol.GetVolume().GetVolumeId())

	var vsTime, vmsTime time.Duration
	n := 0
	for b.Loop() {
		n++
		claim := "data"
		vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: fmt.Sprintf("vs-%d", n)},
			Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}}}
		vsTime += createReady(b, c, vs, func() bool { return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse })
		group := kubevirtv1.SchemeGroupVersion.Group
		vms := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: fmt.Sprintf("vms-%d", n)},
			Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "vm"}}}
		vmsTime += createReady(b, c, vms, func() bool {
			if vms.Status != nil && vms.Status.Phase == snapshotv1.Failed {
				b.Fatalf("VirtualMachineSnapshot %s Failed: %+v", vms.Name, vms.Status)
			}
			return vms.Status != nil && vms.Status.ReadyToUse != nil && *vms.Status.ReadyToUse
		})
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(n) }
	b.ReportMetric(ms(vsTime), "vs-ms")
	b.ReportMetric(ms(vmsTime), "vmsnapshot-ms")
	b.ReportMetric(float64(vmsTime)/float64(vsTime), "vmsnapshot/vs")
	b.ReportMetric(0, "ns/op")
}

// createReady creates obj, polls it every 10 ms until ready (which reads
// obj), and gives the time from the create to ready; then it deletes obj
// and waits until it is gone (not timed). It fails b after a minute.
func createReady(b *testing.B, c client.Client, obj client.Object, ready func() bool) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := c.Create(ctx, obj); err != nil {
		b.Fatal(err)
	}
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			b.Fatal(err)
		}
		if ready() {
			break
		}
		if time.Since(start) > time.Minute {
			b.Fatalf("%T %s not readyToUse after a minute: %+v", obj, obj.GetName(), obj)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	if err := c.Delete(ctx, obj); err != nil {
		b.Fatal(err)
	}
	controlplane.Eventually(b, time.Minute, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	})
	return took
}

// writeSnapDisk writes snapData bytes of data at the start of the disk
// file path, sparse to snapDisk bytes, and fsyncs it.
func writeSnapDisk(b *testing.B, path string) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>8)
	}
	for off := int64(0); off < snapData; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Truncate(snapDisk); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// snapObjects makes what the cluster holds of BenchmarkVMSnapshot's
// volume: the Node (labelled with the driver's topology key: the snapshot
// controller's distributed snapshotting finds the volume's node so), the
// StorageClass and the default VolumeSnapshotClass of the driver, the
// PersistentVolume of volume on the node bound to the claim "data" in
// snapNS, and the stopped VM "vm" whose one disk is that claim.
func snapObjects(b *testing.B, c client.Client, volume string) {
	b.Helper()
	ctx := context.Background()
	class := "hostpath-csi"
	halted := kubevirtv1.RunStrategyHalted
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	for _, o := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: snapNode, Labels: map[string]string{v1alpha1.HostpathTopologyKey: snapNode}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: snapNS}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: hostpath.DefaultDriverName},
		&snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: class, Annotations: map[string]string{vmsnapshot.DefaultClassAnnotation: "true"}},
			Driver: hostpath.DefaultDriverName, DeletionPolicy: snapv1.VolumeSnapshotContentDelete},
		claim,
	} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: hostpath.DefaultDriverName, VolumeHandle: volume}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.HostpathTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{snapNode}}}}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: snapNS, Name: "data", UID: claim.UID},
		}}
	if err := c.Create(ctx, pv); err != nil {
		b.Fatal(err)
	}
	claim.Spec.VolumeName = pv.Name
	if err := c.Update(ctx, claim); err != nil {
		b.Fatal(err)
	}
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.Capacity = pv.Spec.Capacity
	if err := c.Status().Update(ctx, claim); err != nil {
		b.Fatal(err)
	}
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: "vm"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}}}}
	if err := c.Create(ctx, vm); err != nil {
		b.Fatal(err)
	}
}
