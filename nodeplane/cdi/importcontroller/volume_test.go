package importcontroller_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// TestResolve maps PVs to volumes the real hostpath driver created
// (in-process, no root): PVs of another driver or node are not the
// agent's; a PV of this node resolves to the driver's layout, and a
// volumeMode that is not the volume's, an unknown pool, a missing volume
// or data replaced by a symlink are errors naming the PV.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	pool := hostpath.Pool{Name: "local", Path: filepath.Join(dir, "pool")}
	do := hostpath.DefaultOptions()
	do.Endpoint, do.NodeID, do.Pools = "unix://"+filepath.Join(dir, "csi.sock"), node, []hostpath.Pool{pool}
	d, err := hostpath.New(do)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	for _, v := range []struct {
		id    string
		block bool
	}{{"fs", false}, {"blk", true}, {"linked", false}} {
		c := &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}
		if v.block {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}
		_, err := d.Controller().CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: v.id, VolumeCapabilities: []*csi.VolumeCapability{c}, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}})
		must(t, err)
	}
	must(t, os.RemoveAll(filepath.Join(pool.Path, "linked", "data")))
	must(t, os.Symlink(dir, filepath.Join(pool.Path, "linked", "data")))

	opts := importcontroller.DefaultOptions()
	opts.NodeName, opts.Pools = node, []hostpath.Pool{pool}
	fsMode, blockMode := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	pv := func(handle, poolName, onNode string, mode *corev1.PersistentVolumeMode, driver string) *corev1.PersistentVolume {
		attrs := map[string]string{}
		if poolName != "" {
			attrs[hostpath.ParameterStoragePool] = poolName
		}
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + handle},
			Spec: corev1.PersistentVolumeSpec{
				VolumeMode:             mode,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle, VolumeAttributes: attrs}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostpath.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{onNode}}},
				}}}},
			},
		}
	}
	drv := hostpath.DefaultDriverName
	for _, tc := range []struct {
		name    string
		pv      *corev1.PersistentVolume
		ours    bool
		want    importcontroller.Volume
		errIs   error
		errText string
	}{
		{name: "filesystem", pv: pv("fs", "local", node, &fsMode, drv), ours: true, want: importcontroller.Volume{Path: filepath.Join(pool.Path, "fs", "data", "disk.img")}},
		{name: "default pool, no volumeMode", pv: pv("fs", "", node, nil, drv), ours: true, want: importcontroller.Volume{Path: filepath.Join(pool.Path, "fs", "data", "disk.img")}},
		{name: "block", pv: pv("blk", "local", node, &blockMode, drv), ours: true, want: importcontroller.Volume{Path: filepath.Join(pool.Path, "blk", "disk.img"), Block: true}},
		{name: "other driver", pv: pv("fs", "local", node, &fsMode, "other.csi.example.com")},
		{name: "other node", pv: pv("fs", "local", "node-z", &fsMode, drv)},
		{name: "block PV on a filesystem volume", pv: pv("fs", "local", node, &blockMode, drv), ours: true, errText: "PersistentVolume pv-fs: volumeMode Block, but volume fs of storage pool local is a Filesystem volume"},
		{name: "filesystem PV on a block volume", pv: pv("blk", "local", node, &fsMode, drv), ours: true, errText: "volumeMode Filesystem, but volume blk"},
		{name: "unknown pool", pv: pv("fs", "fast", node, &fsMode, drv), ours: true, errText: `PersistentVolume pv-fs: storage pool "fast" is not configured on node node-a`},
		{name: "missing volume", pv: pv("gone", "local", node, &fsMode, drv), ours: true, errIs: fs.ErrNotExist, errText: "PersistentVolume pv-gone: storage pool local: volume gone"},
		{name: "data symlinked out", pv: pv("linked", "local", node, &fsMode, drv), ours: true, errIs: hostpath.ErrNotVolume, errText: "PersistentVolume pv-linked"},
		{name: "hostile handle", pv: pv("../pool", "local", node, &fsMode, drv), ours: true, errText: "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ours, err := importcontroller.Resolve(tc.pv, opts)
			if ours != tc.ours {
				t.Fatalf("Resolve: ours=%v, want %v (err %v)", ours, tc.ours, err)
			}
			if tc.errText == "" {
				if err != nil || got != tc.want {
					t.Fatalf("Resolve = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("Resolve error %v, want one containing %q", err, tc.errText)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("Resolve error %v does not wrap %v", err, tc.errIs)
			}
		})
	}
}

// node is the agent's node in the tests.
const node = "node-a"

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
