package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
)

// TestVMCommandDiskExpansion boots the guest of hack/guest (direct kernel
// boot, TCG) through `converge-node vm --kubeconfig` with a
// persistentVolumeClaim disk on a Filesystem volume of the real hostpath
// CSI driver (disk.img of 1 MiB, the claim's status.capacity 1Mi). The
// guest reports its disk vda at 1 MiB and the VMI's status.volumeStatus
// lists the claim with size 1 MiB; once the claim's status.capacity is
// 4Mi (what the resizer writes after growing the volume), the running
// domain's disk is grown (libvirt blockresize): disk.img is 4 MiB on the
// node, the guest's vda is 4 MiB without a reboot, and volumeStatus says
// so.
func TestVMCommandDiskExpansion(t *testing.T) {
	l := vmtest.StartLibvirt(t)
	guest := vmtest.BuildGuest(t)
	ctrllog.SetLogger(logr.Discard())
	controlplane.RequireForTest(t)
	cp, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	crdtest.Install(t, c, "virtualmachineinstances")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, name, node = "expand", "guest", "n1"
	domName := ns + "_" + name
	l.RemoveDomain(t, domName)
	t.Cleanup(func() { l.RemoveDomain(t, domName) })

	dir := t.TempDir()
	kubeconfig, stateDir := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "state")
	if err := cp.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	pool := hostpathPool(t, node, map[string]bool{"vol-data": false})
	pvDisk := filepath.Join(pool.Path, "vol-data", "data", importcontroller.DiskImage)
	small, large := resource.MustParse("1Mi"), resource.MustParse("4Mi")
	if err := os.WriteFile(pvDisk, make([]byte, small.Value()), 0o644); err != nil { // as an import leaves it
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	pvc := createClaim(t, c, ns, "data")
	bindClaim(t, c, pvc, "vol-data", node)
	setClaimCapacity := func(q resource.Quantity) {
		t.Helper()
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: q}
		if err := c.Status().Update(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	setClaimCapacity(small)

	out := &safebuffer.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, out, "vm", "--node-name", node, "--kubeconfig", kubeconfig, "--libvirt-uri", l.URI,
			"--domain-type", "qemu", "--state-dir", stateDir, "--reserved-memory", "1Mi", "--console-bind-address", "",
			"--storage-pool", pool.Name+"="+pool.Path, "--resync", "1s")
	}()
	alive := func() {
		select {
		case err := <-done:
			t.Fatalf("converge-node vm ended early: %v\n%s", err, out.String())
		default:
		}
	}

	grace := int64(2)
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mem := resource.MustParse("128Mi")
	vmi.Spec.TerminationGracePeriodSeconds = &grace
	vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 1}
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &mem}
	no := false
	vmi.Spec.Domain.Devices.AutoattachMemBalloon = &no
	vmi.Spec.Domain.Firmware = &kubevirtv1.Firmware{KernelBoot: &kubevirtv1.KernelBoot{
		KernelArgs: "console=ttyS0 panic=-1 quiet converge.hostname=" + name,
		Container:  &kubevirtv1.KernelBootContainer{Image: "file://" + guest, KernelPath: "/vmlinuz", InitrdPath: "/initrd.gz"},
	}}
	vmi.Spec.Volumes = []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}
	vmi.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "data", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}
	start := time.Now()
	scheduleVMI(t, c, vmi, node)
	key := client.ObjectKeyFromObject(vmi)
	serialLog := filepath.Join(stateDir, "serial", domName+"-serial.log")

	// seen waits until the guest says vda has q's bytes and the VMI's
	// volumeStatus has the claim at q.
	seen := func(q resource.Quantity) {
		t.Helper()
		line := fmt.Sprintf("%s vda %d\n", guestimage.MarkerDisk, q.Value())
		controlplane.Eventually(t, 180*time.Second, func() bool {
			alive()
			b, _ := os.ReadFile(serialLog)
			return strings.Contains(strings.ReplaceAll(string(b), "\r", ""), line)
		})
		t.Logf("VMI created -> %q on the serial log: %s", strings.TrimSpace(line), time.Since(start).Round(time.Millisecond))
		var last string
		controlplane.Eventually(t, 30*time.Second, func() bool {
			alive()
			if err := c.Get(ctx, key, vmi); err != nil {
				return false
			}
			last = fmt.Sprintf("%+v", vmi.Status.VolumeStatus)
			for _, vs := range vmi.Status.VolumeStatus {
				if vs.Name == "data" && vs.Target == "vda" && vs.Size == q.Value() && vs.PersistentVolumeClaimInfo != nil &&
					vs.PersistentVolumeClaimInfo.ClaimName == "data" && vs.PersistentVolumeClaimInfo.Capacity.Storage().Cmp(q) == 0 {
					return true
				}
			}
			return false
		})
		t.Logf("volumeStatus: %s", last)
	}
	seen(small)

	setClaimCapacity(large)
	grown := time.Now()
	seen(large)
	t.Logf("status.capacity %s -> the guest's vda at %s: %s", large.String(), large.String(), time.Since(grown).Round(time.Millisecond))
	if fi, err := os.Stat(pvDisk); err != nil {
		t.Errorf("the claim's disk.img: %v", err)
	} else if fi.Size() != large.Value() {
		t.Errorf("the claim's disk.img: size %d, want %d", fi.Size(), large.Value())
	}
	if err := c.Get(ctx, key, vmi); err != nil || vmi.Status.Phase != kubevirtv1.Running {
		t.Errorf("VMI after the expansion: phase %s (%v), want Running", vmi.Status.Phase, err)
	}
	if !strings.Contains(out.String(), "disk expanded") {
		t.Errorf("converge-node vm did not log the expansion:\n%s", out.String())
	}

	if err := c.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 60*time.Second, func() bool {
		alive()
		return len(l.Domains(t)) == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("converge-node vm after cancel: %v", err)
	}
}
