package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/internal/testing/storagetest"
	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/cdi/importcontroller"
	"github.com/converge-dev/converge/nodeplane/csi/hostpath"
)

// hostpathPool creates volumes (id → block) with the real hostpath CSI
// driver, in-process, in a pool of its own for node, and gives the pool.
func hostpathPool(t *testing.T, node string, vols map[string]bool) hostpath.Pool {
	t.Helper()
	d, pool := storagetest.StartDriver(t, node, "local")
	for id, block := range vols {
		v := storagetest.Volume{ID: id, Size: resource.MustParse("1Mi"), Pool: pool, Node: node, Block: block}
		if err := v.Create(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// createClaim creates the Filesystem PVC namespace/claim, left Pending.
func createClaim(t *testing.T, c client.Client, namespace, claim string) *corev1.PersistentVolumeClaim {
	t.Helper()
	mode := corev1.PersistentVolumeFilesystem
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: claim}}
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pvc.Spec.VolumeMode = &mode
	pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}
	if err := c.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// bindClaim binds pvc, as kube-controller-manager does, to a new PV of
// the hostpath driver holding volume handle on node onNode.
func bindClaim(t *testing.T, c client.Client, pvc *corev1.PersistentVolumeClaim, handle, onNode string) {
	t.Helper()
	ctx := context.Background()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + pvc.Name}}
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}
	pv.Spec.AccessModes, pv.Spec.VolumeMode = pvc.Spec.AccessModes, pvc.Spec.VolumeMode
	pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: hostpath.DefaultDriverName, VolumeHandle: handle}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostpath.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{onNode}}},
	}}}}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	if err := c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.VolumeName = pv.Name
	if err := c.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if err := c.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
}

// scheduleVMI creates vmi and binds it to node as converge's scheduler
// does (status.nodeName, phase Scheduled).
func scheduleVMI(t *testing.T, c client.Client, vmi *kubevirtv1.VirtualMachineInstance, node string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status.NodeName, vmi.Status.Phase = node, kubevirtv1.Scheduled
	if err := c.Status().Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
}

// readyCondition gives the VMI's Ready condition (zero when absent).
func readyCondition(vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachineInstanceCondition {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c
		}
	}
	return kubevirtv1.VirtualMachineInstanceCondition{}
}

// TestVMCommandGuestDisks boots the Debian guest of hack/guest (direct
// kernel boot, TCG) through `converge-node vm --kubeconfig` on a libvirtd
// started for the test, with three disks: a persistentVolumeClaim bound
// to a volume of the real hostpath CSI driver (in the pool of
// --storage-pool), a cloudInitNoCloud volume whose user data is in a
// Secret, and an emptyDisk. The domain XML has them as virtio disks at
// the pool's disk.img (raw), the VMI's ISO (raw) and its qcow2 image;
// the guest boots (its marker on the serial log); deleting the VMI
// removes the domain and the VMI's files, and leaves the PVC's disk.
func TestVMCommandGuestDisks(t *testing.T) {
	l := vmtest.StartLibvirt(t)
	guest := vmtest.BuildGuest(t)
	ctrllog.SetLogger(logr.Discard())
	controlplane.RequireForTest(t)
	cp, c, _ := controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme)
	crdtest.Install(t, c, "virtualmachineinstances")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, name, node = "disks", "guest", "n1"
	domName := ns + "_" + name
	l.RemoveDomain(t, domName)
	t.Cleanup(func() { l.RemoveDomain(t, domName) })

	dir := t.TempDir()
	kubeconfig, stateDir := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "state")
	if err := cp.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	pool := hostpathPool(t, node, map[string]bool{"vol-data": false})
	opts := importcontroller.DefaultOptions()
	opts.NodeName, opts.Pools = node, []hostpath.Pool{pool}
	pvDisk := filepath.Join(pool.Path, "vol-data", "data", importcontroller.DiskImage)
	if err := os.WriteFile(pvDisk, make([]byte, 1<<20), 0o644); err != nil { // as an import leaves it
		t.Fatal(err)
	}

	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "userdata"}, Data: map[string][]byte{"userdata": []byte("#cloud-config\nbootcmd: [echo converge]\n")}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	bindClaim(t, c, createClaim(t, c, ns, "data"), "vol-data", node)

	out := &safebuffer.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, out, "vm", "--node-name", node, "--kubeconfig", kubeconfig, "--libvirt-uri", l.URI,
			"--domain-type", "qemu", "--state-dir", stateDir, "--reserved-memory", "1Mi", "--console-bind-address", "",
			"--storage-pool", pool.Name+"="+pool.Path, "--resync", "5s")
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
	q := resource.MustParse("128Mi")
	vmi.Spec.TerminationGracePeriodSeconds = &grace
	vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Cores: 1}
	vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &q}
	no := false
	vmi.Spec.Domain.Devices.AutoattachMemBalloon = &no
	vmi.Spec.Domain.Firmware = &kubevirtv1.Firmware{KernelBoot: &kubevirtv1.KernelBoot{
		KernelArgs: "console=ttyS0 panic=-1 quiet converge.hostname=" + name,
		Container:  &kubevirtv1.KernelBootContainer{Image: "file://" + guest, KernelPath: "/vmlinuz", InitrdPath: "/initrd.gz"},
	}}
	virtio := &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}
	for _, v := range []kubevirtv1.Volume{
		{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "userdata"}}}},
		{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("64Mi")}}},
	} {
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v)
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name, DiskDevice: kubevirtv1.DiskDevice{Disk: virtio}})
	}
	start := time.Now()
	scheduleVMI(t, c, vmi, node)
	key := client.ObjectKeyFromObject(vmi)
	controlplane.Eventually(t, 120*time.Second, func() bool {
		alive()
		return c.Get(ctx, key, vmi) == nil && vmi.Status.Phase == kubevirtv1.Running
	})
	t.Logf("VMI created -> Running: %s", time.Since(start).Round(time.Millisecond))

	xmlText, err := l.Virsh("dumpxml", domName)
	if err != nil {
		t.Fatal(err)
	}
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(xmlText); err != nil {
		t.Fatal(err)
	}
	vmiDir := filepath.Join(stateDir, "vmis", fmt.Sprintf("%s_%s_%s", ns, name, vmi.UID))
	want := []struct{ file, format, dev string }{
		{pvDisk, "raw", "vda"},
		{filepath.Join(vmiDir, "cloudinit.iso"), "raw", "vdb"},
		{filepath.Join(vmiDir, "scratch.qcow2"), "qcow2", "vdc"},
	}
	var got []string
	for _, d := range x.Devices.Disks {
		if d.Source != nil && d.Source.File != nil {
			got = append(got, fmt.Sprintf("%s %s %s %s", d.Source.File.File, d.Driver.Type, d.Target.Dev, d.Target.Bus))
		}
	}
	var wantLines []string
	for _, w := range want {
		wantLines = append(wantLines, fmt.Sprintf("%s %s %s virtio", w.file, w.format, w.dev))
		if _, err := os.Stat(w.file); err != nil {
			t.Errorf("disk of the running domain: %v", err)
		}
	}
	if strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("domain disks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}

	serialLog := filepath.Join(stateDir, "serial", domName+"-serial.log")
	marker := regexp.MustCompile(`CONVERGE-GUEST-OK ` + name + ` `)
	controlplane.Eventually(t, 120*time.Second, func() bool {
		alive()
		b, _ := os.ReadFile(serialLog)
		return marker.Match(b)
	})
	t.Logf("VMI created -> guest marker on the serial log: %s", time.Since(start).Round(time.Millisecond))

	if err := c.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 60*time.Second, func() bool {
		alive()
		return apierrors.IsNotFound(c.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{}))
	})
	if doms := l.Domains(t); len(doms) != 0 {
		t.Errorf("domains left: %v", doms)
	}
	if entries, err := os.ReadDir(filepath.Join(stateDir, "vmis")); err != nil || len(entries) != 0 {
		t.Errorf("VMI files left on the node: %v %v", entries, err)
	}
	if _, err := os.Stat(pvDisk); err != nil {
		t.Errorf("the PVC's disk went with the VMI: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("converge-node vm after cancel: %v", err)
	}
}
