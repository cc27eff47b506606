package vmdisks_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestEmptyDisk: an emptyDisk is a sparse qcow2 image of its capacity;
// a second Prepare keeps it with what the guest wrote; Release deletes it.
func TestEmptyDisk(t *testing.T) {
	requireTool(t, "qemu-img", "qemu-utils")
	d, state := newDisks(t, objects{}, objects{})
	vol := volume("scratch", kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("2Gi")}})
	vmi := vmiWith("vm", vol)
	ctx := context.Background()
	if err := d.Prepare(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	src, _ := d.Resolve(vmi, vol)
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal([]byte(run(t, "qemu-img", "info", "--output=json", "-f", "qcow2", src.Path)), &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.VirtualSize != 2<<30 {
		t.Errorf("emptyDisk: %s of %d bytes, want qcow2 of %d", info.Format, info.VirtualSize, 2<<30)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(src.Path, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 4<<20 {
		t.Errorf("emptyDisk uses %d bytes on the node, want a sparse image", used)
	}
	run(t, "qemu-io", "-f", "qcow2", "-c", "write -P 0x5a 1M 4k", src.Path)
	if err := d.Prepare(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "qemu-io", "-r", "-f", "qcow2", "-c", "read -P 0x5a 1M 4k", src.Path); strings.Contains(out, "Pattern verification failed") {
		t.Errorf("a second Prepare lost the guest's data: %s", out)
	}
	if err := d.Release(vmi.Namespace, vmi.Name, vmi.UID); err != nil {
		t.Fatal(err)
	}
	if left := treeFiles(t, state); strings.Join(left, ",") != "vmis" {
		t.Errorf("after Release the state holds %v, want only vmis/", left)
	}
}

// TestObjectDisks: secret and configMap volumes are ISOs of one file per
// key (configMap data and binaryData), labelled volumeLabel or cfgdata as
// KubeVirt; a missing optional object gives an empty ISO, a missing
// required one an error naming it.
func TestObjectDisks(t *testing.T) {
	yes := true
	secrets := objects{"ns/creds": {"username": []byte("admin"), "password": []byte("s3cret")}}
	configMaps := objects{"ns/ks": {"ks.cfg": []byte("text\nreboot\n"), "blob.bin": {0, 1, 2}}}
	for _, tc := range []struct {
		name      string
		src       kubevirtv1.VolumeSource
		wantLabel string
		wantFiles map[string]string
		wantErr   string
	}{
		{name: "secret", src: kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "creds"}},
			wantLabel: "cfgdata", wantFiles: map[string]string{"/username": "admin", "/password": "s3cret"}},
		{name: "configMap labelled OEMDRV", src: kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ks"}, VolumeLabel: "OEMDRV"}},
			wantLabel: "OEMDRV", wantFiles: map[string]string{"/ks.cfg": "text\nreboot\n", "/blob.bin": "\x00\x01\x02"}},
		{name: "missing optional secret", src: kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "none", Optional: &yes}},
			wantLabel: "cfgdata", wantFiles: map[string]string{}},
		{name: "missing secret", src: kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "none"}},
			wantErr: `VirtualMachineInstance ns/vm: volume "v": Secret ns/none: ns/none: not found`},
		{name: "missing configMap", src: kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "none"}}},
			wantErr: `VirtualMachineInstance ns/vm: volume "v": ConfigMap ns/none: ns/none: not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newDisks(t, secrets, configMaps)
			vol := volume("v", tc.src)
			vmi := vmiWith("vm", vol)
			err := d.Prepare(context.Background(), vmi)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Prepare: %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			src, _ := d.Resolve(vmi, vol)
			var paths []string
			for p := range tc.wantFiles {
				paths = append(paths, p)
			}
			label, files := readISO(t, src.Path, paths...)
			if label != tc.wantLabel {
				t.Errorf("label %q, want %q", label, tc.wantLabel)
			}
			for p, want := range tc.wantFiles {
				if files[p] != want {
					t.Errorf("%s = %q, want %q", p, files[p], want)
				}
			}
			if n := len(listISO(t, src.Path, "/")); n != len(tc.wantFiles) {
				t.Errorf("%d files in the ISO, want %d", n, len(tc.wantFiles))
			}
		})
	}
}

// TestReleaseLeavesNothing: a VMI with one volume of each kind the node
// prepares has all its files in its directory; Release removes the
// directory (and is idempotent); the containerDisk cache stays.
func TestReleaseLeavesNothing(t *testing.T) {
	reg := startRegistry(t, "", "")
	reg.push(t, "cd/all:1", map[string][]byte{"disk/disk.qcow2": qcow2Disk(t, 0x77)})
	d, state := newDisks(t, objects{"ns/s": {"k": []byte("v")}}, objects{"ns/c": {"k": []byte("v")}})
	vmi := vmiWith("all",
		containerDisk("root", reg.host+"/cd/all:1", ""),
		volume("scratch", kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Mi")}}),
		volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}),
		volume("sec", kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "s"}}),
		volume("cm", kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}))
	if err := d.Prepare(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	dir := d.VMIDir(vmi.Namespace, vmi.Name, vmi.UID)
	if got, want := strings.Join(treeFiles(t, dir), " "), "ci.iso cm.iso root.qcow2 scratch.qcow2 sec.iso"; got != want {
		t.Errorf("VMI directory holds %q, want %q", got, want)
	}
	for range 2 {
		if err := d.Release(vmi.Namespace, vmi.Name, vmi.UID); err != nil {
			t.Fatal(err)
		}
	}
	if left := treeFiles(t, filepath.Join(state, "vmis")); len(left) != 0 {
		t.Errorf("after Release: %v", left)
	}
	if _, err := os.Stat(filepath.Join(state, "containerdisks")); err != nil {
		t.Errorf("containerDisk cache: %v", err)
	}
}

// TestSweep: Sweep removes the directories of the VMIs keep rejects and
// nothing else (kept VMIs, files that are not a VMI's directory).
func TestSweep(t *testing.T) {
	d, state := newDisks(t, objects{}, objects{})
	ci := volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}})
	for _, name := range []string{"live", "gone"} {
		if err := d.Prepare(context.Background(), vmiWith(name, ci)); err != nil {
			t.Fatal(err)
		}
	}
	stray := filepath.Join(state, "vmis", "not-a-vmi")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Sweep(func(uid types.UID) bool { return uid == "uid-live" }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(treeFiles(t, filepath.Join(state, "vmis")), " "); got != "not-a-vmi ns_live_uid-live ns_live_uid-live/ci.iso" {
		t.Errorf("after Sweep: %q", got)
	}
}
