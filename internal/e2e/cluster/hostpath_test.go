package cluster_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// The example's HostPathProvisioner: its pool, and what converge derives
// for it (components/hpp).
const (
	poolPath      = "/var/hpvolumes"     // testdata/example/hostpathprovisioner.yaml, pool local
	storageClass  = "hostpath-csi-local" // hostpath-csi-<pool>
	csiDriverName = "kubevirt.io.hostpath-provisioner"
	volumeImage   = "localhost/converge/volumewriter:1"
	volumeNS      = "hostpath-e2e"
)

// TestHostpathVolume: on the example's Sync, Ready through the native
// operators, the hostpath CSI driver the HostPathProvisioner operator runs
// is registered with the kubelet (the CSINode lists it), and a pod
// mounting a PVC of the pool's StorageClass runs: the PVC is provisioned
// and bound by the driver, the kubelet mounts the volume through CSI, the
// pod writes a file there and turns Ready, and the file is in the pool on
// the host; deleting the pod and the PVC deletes the PV and its
// directory.
func TestHostpathVolume(t *testing.T) {
	e, _, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)

	eventually(t, 2*time.Minute, "the kubelet registered "+csiDriverName, func() (bool, string) {
		n := &storagev1.CSINode{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: e.Cluster.NodeName}, n); err != nil {
			return false, err.Error()
		}
		for _, d := range n.Spec.Drivers {
			if d.Name == csiDriverName {
				return true, ""
			}
		}
		return false, "CSINode drivers: " + driverNames(n)
	})

	importVolumeWriter(t, ctx, e)
	w := startWriter(t, ctx, e, "data", storageClass)
	t.Logf("pod with a hostpath-csi volume: Ready %s after its creation", w.Ready.Round(time.Millisecond))
	if w.pv.Spec.CSI == nil || w.pv.Spec.CSI.Driver != csiDriverName {
		t.Errorf("PV %s: source %+v, want CSI driver %s", w.pv.Name, w.pv.Spec.PersistentVolumeSource, csiDriverName)
	}
	target := filepath.Join(localcluster.DefaultKubeletRootDir, "pods", string(w.pod.UID), "volumes", "kubernetes.io~csi", w.pv.Name, "mount")
	if !mounted(t, target) {
		t.Errorf("%s is not a mount point: the kubelet did not publish the volume through CSI", target)
	}
	if found := findContent(poolPath, w.content); len(found) != 1 {
		t.Fatalf("the pod's file with %q: found at %v under %s, want once", w.content, found, poolPath)
	}
	w.stop(t, ctx, e, poolPath)
}

// driverNames lists the drivers of a CSINode.
func driverNames(n *storagev1.CSINode) string {
	var s []string
	for _, d := range n.Spec.Drivers {
		s = append(s, d.Name)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// mounted tells whether path is a mount point (in this process's mount
// namespace, the host's).
func mounted(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == path {
			return true
		}
	}
	return false
}

// randomHex gives 16 random bytes in hex.
func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
