package snapshotter_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
	"github.com/converge-dev/converge/nodeplane/csi/snapshotter"
)

// TestValidate: each missing or invalid option is named.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*snapshotter.Options)
		want string
	}{
		{"no clients", func(o *snapshotter.Options) { o.Client, o.Snapshots = nil, nil }, "clients required"},
		{"no connection", func(o *snapshotter.Options) { o.Conn = nil }, "gRPC connection"},
		{"no node", func(o *snapshotter.Options) { o.NodeName = "" }, "NodeName required"},
		{"no workers", func(o *snapshotter.Options) { o.Threadiness = 0 }, "Threadiness"},
		{"empty prefix", func(o *snapshotter.Options) { o.NamePrefix = "" }, "NamePrefix"},
		{"retry bounds", func(o *snapshotter.Options) { o.RetryMax = o.RetryMin / 2 }, "RetryMin <= RetryMax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := snapshotter.DefaultOptions()
			o.Client, o.Snapshots, o.NodeName = kubernetes.New(nil), snapclientset.New(nil), "node-a"
			o.Conn = &grpc.ClientConn{}
			if err := o.Validate(); err != nil {
				t.Fatalf("valid options: %v", err)
			}
			tc.edit(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestSnapshotsOfItsNode runs a hostpath driver on a unix socket and its
// csi-snapshotter (upstream's sidecar controller) against a real API
// server with the snapshot CRDs and the driver's class: a VolumeSnapshotContent of the driver
// labelled with the node, as the snapshot controller creates it, gets
// readyToUse, a snapshot handle and the volume's size, and the snapshot is
// in the pool; one labelled with another node is left alone; deleting the
// first (deletionPolicy Delete) deletes the snapshot and removes the
// finalizer, so the content goes.
func TestSnapshotsOfItsNode(t *testing.T) {
	env, c, _ := controlplane.StartEnvForTest(t)
	crdtest.Install(t, c, "volumesnapshotclasses", "volumesnapshotcontents")
	cs, err := kubernetes.NewForConfig(env.Config)
	must(t, err)
	snaps, err := snapclientset.NewForConfig(env.Config)
	must(t, err)

	dir := t.TempDir()
	pool := filepath.Join(dir, "pool")
	opts := hostpath.DefaultOptions()
	opts.Endpoint, opts.NodeID = "unix://"+filepath.Join(dir, "csi.sock"), "node-a"
	opts.Pools = []hostpath.Pool{{Name: "local", Path: pool}}
	d, err := hostpath.New(opts)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lis, err := d.Listen()
	must(t, err)
	go d.ServeListener(ctx, lis) //nolint:errcheck // ends with ctx
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { conn.Close() })

	vol, err := d.Controller().CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}})
	must(t, err)

	so := snapshotter.DefaultOptions()
	so.Client, so.Snapshots, so.Conn, so.NodeName = cs, snaps, conn, "node-a"
	so.RetryMin = 100 * time.Millisecond
	s, err := snapshotter.New(ctx, so)
	must(t, err)
	if s.Driver() != hostpath.DefaultDriverName {
		t.Errorf("Driver() = %q, want %q", s.Driver(), hostpath.DefaultDriverName)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	class := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-csi"},
		Driver: hostpath.DefaultDriverName, DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	_, err = snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, class, metav1.CreateOptions{})
	must(t, err)
	mine := content(t, snaps, "content-a", vol.GetVolume().GetVolumeId(), "node-a")
	other := content(t, snaps, "content-b", vol.GetVolume().GetVolumeId(), "node-b")
	var got *snapv1.VolumeSnapshotContent
	controlplane.Eventually(t, time.Minute, func() bool {
		got, err = snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, mine.Name, metav1.GetOptions{})
		return err == nil && got.Status != nil && got.Status.ReadyToUse != nil && *got.Status.ReadyToUse
	})
	if got.Status.SnapshotHandle == nil || got.Status.RestoreSize == nil || *got.Status.RestoreSize != 1<<20 {
		t.Fatalf("content-a status %+v: want a snapshot handle and restoreSize 1Mi", got.Status)
	}
	snapDir := filepath.Join(pool, ".snapshots", *got.Status.SnapshotHandle)
	if _, err := os.Stat(snapDir); err != nil {
		t.Errorf("the snapshot is not in the pool: %v", err)
	}
	b, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, other.Name, metav1.GetOptions{})
	must(t, err)
	if b.Status != nil {
		t.Errorf("content-b of node-b: status %+v, want none (another node's)", b.Status)
	}

	// The snapshot controller marks a content being deleted, then
	// deletes it; the sidecar deletes the snapshot and its finalizer.
	_, err = snaps.SnapshotV1().VolumeSnapshotContents().Patch(ctx, mine.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"snapshot.storage.kubernetes.io/volumesnapshot-being-deleted":"yes"}}}`), metav1.PatchOptions{})
	must(t, err)
	must(t, snaps.SnapshotV1().VolumeSnapshotContents().Delete(ctx, mine.Name, metav1.DeleteOptions{}))
	controlplane.Eventually(t, time.Minute, func() bool {
		_, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, mine.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := os.Stat(snapDir); !os.IsNotExist(err) {
		t.Errorf("the snapshot is still in the pool after its content was deleted: %v", err)
	}
}

// content creates a dynamic VolumeSnapshotContent of the hostpath driver
// and its class hostpath-csi for volume, labelled for node's sidecar, with the snapshot controller's
// finalizer, bound to a VolumeSnapshot of the same name.
func content(t *testing.T, snaps snapclientset.Interface, name, volume, node string) *snapv1.VolumeSnapshotContent {
	t.Helper()
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{snapshotter.ManagedByLabel: node},
			Finalizers: []string{"snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			DeletionPolicy:          snapv1.VolumeSnapshotContentDelete,
			Driver:                  hostpath.DefaultDriverName,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &volume},
			VolumeSnapshotRef:       corev1ObjectReference(name),
			VolumeSnapshotClassName: new("hostpath-csi"),
		},
	}
	c, err := snaps.SnapshotV1().VolumeSnapshotContents().Create(context.Background(), c, metav1.CreateOptions{})
	must(t, err)
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// corev1ObjectReference names the VolumeSnapshot name in namespace vms,
// with a UID (the sidecar names the CSI snapshot after it).
func corev1ObjectReference(name string) corev1.ObjectReference {
	return corev1.ObjectReference{Namespace: "vms", Name: name, UID: types.UID("uid-" + name)}
}
