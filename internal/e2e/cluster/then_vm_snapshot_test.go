package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// snapNS is TestVMSnapshotRestore's namespace, made and removed by it.
const snapNS = "vm-snapshot"

// TestVMSnapshotRestore is issue 21's VM snapshot and restore on the real
// cluster. The test guest cannot write to its disks, so the content the
// guest shows comes from a data disk: a DataVolume imported over HTTP
// holding a NoCloud ISO (guestimage.NoCloudISO) whose user data has the
// OLD marker; the VM has no cloudInitNoCloud volume, so the guest
// (converge.cloudinit=1) finds that disk and prints its user data on the
// serial console. Steps: the VM (root disk and data disk from
// dataVolumeTemplates, runStrategy Always) runs and its console shows
// the OLD marker; a VirtualMachineSnapshot of the running VM reaches
// phase Succeeded, readyToUse, with both disks included and the Online
// and NoGuestAgent indications (the snapshot controller and the
// VolumeSnapshot machinery deployed by the Sync); the VM is stopped
// (runStrategy Halted) and the data disk's disk.img is overwritten, in
// the hostpath pool on the node, by an ISO of the same size with the NEW
// marker; started again, the guest prints the NEW marker (the change is
// real); stopped again, a VirtualMachineRestore of the snapshot into the
// same VM completes, the VM's data disk is now the restored claim of
// status.restores; started again, the guest prints the OLD marker and not
// the NEW one. The namespace and what is in it go at the end.
func TestVMSnapshotRestore(t *testing.T) {
	e, _, _, _ := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	waitSyncReady(t, ctx, e)
	guestDir := vmtest.BuildGuest(t)
	scheme := vmScheme(t)
	if err := snapshotv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	vc, err := client.New(e.Cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	// The files served: the guest's disk and the data disk's two ISOs,
	// whose markers have one length so the ISOs have one size.
	id := randomHex(t)[:12]
	oldMarker, newMarker := "SNAP-OLD-"+id, "SNAP-NEW-"+id
	dir := t.TempDir()
	disk, err := os.ReadFile(filepath.Join(guestDir, guestimage.DiskImage))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, guestimage.DiskImage), disk, 0o644); err != nil {
		t.Fatal(err)
	}
	const oldISO, newISO = "old.iso", "new.iso"
	for name, marker := range map[string]string{oldISO: oldMarker, newISO: newMarker} {
		if err := guestimage.NoCloudISO(filepath.Join(dir, name), userData(marker), "instance-id: "+vmSnapName+"\nlocal-hostname: "+vmSnapName+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	newBytes, err := os.ReadFile(filepath.Join(dir, newISO))
	if err != nil {
		t.Fatal(err)
	}
	if fileSize(filepath.Join(dir, oldISO)) != int64(len(newBytes)) {
		t.Fatalf("the two ISOs differ in size: %d and %d", fileSize(filepath.Join(dir, oldISO)), len(newBytes))
	}
	files := guestimage.ServeFiles(t, localcluster.NodeIP+":0", dir, guestimage.DiskImage, oldISO)

	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer ccancel()
		_ = vc.Delete(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: snapNS}})
		eventually(t, 4*time.Minute, "cleanup: namespace "+snapNS+" is gone", func() (bool, string) {
			err := vc.Get(cctx, client.ObjectKey{Name: snapNS}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}()
	defer func() {
		if t.Failed() {
			t.Logf("after a failure:\n%s", snapState(ctx, e, vc))
		}
	}()
	if err := vc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: snapNS, Labels: map[string]string{"converge-test": "vm-snapshot"}}}); err != nil {
		t.Fatal(err)
	}

	st := &step{t: t}
	key := client.ObjectKey{Namespace: snapNS, Name: vmSnapName}
	serial := filepath.Join(agentStateDir, "serial", snapNS+"_"+vmSnapName+"-serial.log")
	logStart := fileSize(serial)
	vm := vmSnapVM(files.FileURL(guestimage.DiskImage), files.FileURL(oldISO))
	if err := vc.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}

	// 1. The VM runs and shows the OLD content of its data disk.
	dataDV := vmSnapName + "-data"
	for _, n := range []string{vmSnapName + "-root", dataDV} {
		st.do("the DataVolume "+n+" imports over HTTP (Succeeded)", 5*time.Minute, func() (bool, string) {
			dv := &cdiv1.DataVolume{}
			if err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: n}, dv); err != nil {
				return false, err.Error()
			}
			if dv.Status.Phase == cdiv1.Failed {
				st.stop("DataVolume %s Failed: %+v", n, dv.Status.Conditions)
			}
			return dv.Status.Phase == cdiv1.Succeeded, fmt.Sprintf("phase %s conditions %+v", dv.Status.Phase, dv.Status.Conditions)
		})
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	st.do("the VMI runs, Ready", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, key, vmi); err != nil {
			return false, "VMI: " + err.Error()
		}
		return vmi.Status.Phase == kubevirtv1.Running && vmiReady(vmi), fmt.Sprintf("phase %s conditions %+v", vmi.Status.Phase, vmi.Status.Conditions)
	})
	st.do("the guest prints the OLD marker of its data disk", 5*time.Minute, func() (bool, string) {
		log := logFrom(serial, logStart)
		return strings.Contains(log, markerLine(oldMarker)) && strings.Contains(log, guestimage.MarkerOK+" "+vmSnapName+" "), serial + ": " + tail(log, 1500)
	})

	// 2. A snapshot of the running VM.
	apiGroup := kubevirtv1.SchemeGroupVersion.Group
	snap := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: "snap"},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: vmSnapName}}}
	if err := vc.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st.do("the VirtualMachineSnapshot Succeeds, readyToUse", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKeyFromObject(snap), snap); err != nil {
			return false, err.Error()
		}
		s := snap.Status
		if s == nil {
			return false, "no status"
		}
		if s.Phase == snapshotv1.Failed {
			st.stop("snapshot Failed: %+v", s)
		}
		return s.Phase == snapshotv1.Succeeded && s.ReadyToUse != nil && *s.ReadyToUse, fmt.Sprintf("%+v", *s)
	})
	t.Logf("VirtualMachineSnapshot Succeeded %v after its creation", time.Since(start).Round(time.Millisecond))
	st.do("the snapshot has both disks and the Online and NoGuestAgent indications", time.Second, func() (bool, string) {
		s := snap.Status
		ind := map[snapshotv1.Indication]bool{}
		for _, i := range s.SourceIndications {
			ind[i.Indication] = true
		}
		vols := map[string]bool{}
		if s.SnapshotVolumes != nil {
			for _, v := range s.SnapshotVolumes.IncludedVolumes {
				vols[v] = true
			}
		}
		return ind[snapshotv1.VMSnapshotOnlineSnapshotIndication] && ind[snapshotv1.VMSnapshotNoGuestAgentIndication] && vols["rootdisk"] && vols["datadisk"],
			fmt.Sprintf("sourceIndications %+v snapshotVolumes %+v", s.SourceIndications, s.SnapshotVolumes)
	})

	// 3. The VM stopped, its data disk changed; started, it shows the NEW content.
	setRunStrategy(t, st, ctx, vc, kubevirtv1.RunStrategyHalted)
	st.do("the VMI is gone", 3*time.Minute, func() (bool, string) {
		err := vc.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	img := dataDiskImage(t, ctx, vc, dataDV)
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(newBytes, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	logStart = fileSize(serial)
	setRunStrategy(t, st, ctx, vc, kubevirtv1.RunStrategyAlways)
	st.do("started again, the guest prints the NEW marker", 5*time.Minute, func() (bool, string) {
		log := logFrom(serial, logStart)
		return strings.Contains(log, markerLine(newMarker)) && strings.Contains(log, guestimage.MarkerOK+" "+vmSnapName+" "), serial + ": " + tail(log, 1500)
	})
	setRunStrategy(t, st, ctx, vc, kubevirtv1.RunStrategyHalted)
	st.do("the VMI is gone", 3*time.Minute, func() (bool, string) {
		err := vc.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	// 4. The restore into the same VM; started, it shows the OLD content.
	restore := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: "restore"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: vmSnapName},
			VirtualMachineSnapshotName: snap.Name}}
	if err := vc.Create(ctx, restore); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	st.do("the VirtualMachineRestore completes", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKeyFromObject(restore), restore); err != nil {
			return false, err.Error()
		}
		s := restore.Status
		return s != nil && s.Complete != nil && *s.Complete, fmt.Sprintf("%+v", s)
	})
	t.Logf("VirtualMachineRestore complete %v after its creation", time.Since(start).Round(time.Millisecond))
	var restoredClaim string
	for _, r := range restore.Status.Restores {
		if r.VolumeName == "datadisk" {
			restoredClaim = r.PersistentVolumeClaimName
		}
	}
	st.do("the VM's data disk is the restored claim "+restoredClaim, time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, key, vm); err != nil {
			return false, err.Error()
		}
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if v.Name == "datadisk" {
				return restoredClaim != "" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == restoredClaim,
					fmt.Sprintf("volume %+v, restores %+v", v.VolumeSource, restore.Status.Restores)
			}
		}
		return false, "no datadisk volume"
	})
	logStart = fileSize(serial)
	setRunStrategy(t, st, ctx, vc, kubevirtv1.RunStrategyAlways)
	st.do("started after the restore, the guest prints the OLD marker, not the NEW", 5*time.Minute, func() (bool, string) {
		log := logFrom(serial, logStart)
		if strings.Contains(log, markerLine(newMarker)) {
			st.stop("the restored guest printed the NEW marker: %s", tail(log, 1500))
		}
		return strings.Contains(log, markerLine(oldMarker)) && strings.Contains(log, guestimage.MarkerOK+" "+vmSnapName+" "), serial + ": " + tail(log, 1500)
	})
}

// vmSnapName is TestVMSnapshotRestore's VM.
const vmSnapName = "snap-vm"

// vmSnapVM is TestVMSnapshotRestore's VM in snapNS: runStrategy Always,
// no NIC, a root disk (vda) imported from rootURL and a data disk (vdb)
// imported from dataURL, both dataVolumeTemplates of 64Mi on the
// hostpath class; no cloud-init volume, the guest reads its NoCloud data
// from the data disk.
func vmSnapVM(rootURL, dataURL string) *kubevirtv1.VirtualMachine {
	class, always, no := storageClass, kubevirtv1.RunStrategyAlways, false
	grace := int64(2)
	mem := resource.MustParse("128Mi")
	size := resource.MustParse("64Mi")
	template := func(name, url string) kubevirtv1.DataVolumeTemplateSpec {
		return kubevirtv1.DataVolumeTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: url}},
				Storage: &cdiv1.StorageSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}}
	}
	disk := func(name string) kubevirtv1.Disk {
		return kubevirtv1.Disk{Name: name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}
	}
	dv := func(name, dv string) kubevirtv1.Volume {
		return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: dv}}}
	}
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: vmSnapName},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy:         &always,
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{template(vmSnapName+"-root", rootURL), template(vmSnapName+"-data", dataURL)},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				TerminationGracePeriodSeconds: &grace,
				Domain: kubevirtv1.DomainSpec{
					CPU:     &kubevirtv1.CPU{Cores: 1},
					Memory:  &kubevirtv1.Memory{Guest: &mem},
					Devices: kubevirtv1.Devices{AutoattachPodInterface: &no, Disks: []kubevirtv1.Disk{disk("rootdisk"), disk("datadisk")}},
				},
				Volumes: []kubevirtv1.Volume{dv("rootdisk", vmSnapName+"-root"), dv("datadisk", vmSnapName+"-data")},
			}},
		},
	}
}

// setRunStrategy sets the run strategy of TestVMSnapshotRestore's VM, as
// virtctl start and stop do.
func setRunStrategy(t *testing.T, st *step, ctx context.Context, vc client.Client, rs kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: vmSnapName}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"runStrategy":"`+string(rs)+`"}}`))
	st.do("the VM takes runStrategy "+string(rs), time.Minute, func() (bool, string) {
		err := vc.Patch(ctx, vm, patch)
		return err == nil, fmt.Sprint(err)
	})
}

// dataDiskImage gives the path, in the hostpath pool on the node, of the
// disk.img of claim (the driver's layout, CDI's file name).
func dataDiskImage(t *testing.T, ctx context.Context, vc client.Client, claim string) string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: claim}, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := vc.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csiDriverName {
		t.Fatalf("PV %s source %+v, want the %s driver", pv.Name, pv.Spec.PersistentVolumeSource, csiDriverName)
	}
	img := filepath.Join(poolPath, pv.Spec.CSI.VolumeHandle, "data", "disk.img")
	if fileSize(img) == 0 {
		t.Fatalf("%s missing or empty", img)
	}
	return img
}

// snapState describes, for a failure, what is in snapNS: the VM, its VMI,
// the DataVolumes, claims, snapshots and restores, the namespace's events,
// the end of the VM agent's log and of the VM's serial log.
func snapState(ctx context.Context, e *cluster.Env, vc client.Client) string {
	var b strings.Builder
	key := client.ObjectKey{Namespace: snapNS, Name: vmSnapName}
	vm := &kubevirtv1.VirtualMachine{}
	if err := vc.Get(ctx, key, vm); err == nil {
		fmt.Fprintf(&b, "VM: printableStatus %s ready %v conditions %+v volumes %+v\n", vm.Status.PrintableStatus, vm.Status.Ready, vm.Status.Conditions, vm.Spec.Template.Spec.Volumes)
	} else {
		fmt.Fprintf(&b, "VM: %v\n", err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := vc.Get(ctx, key, vmi); err == nil {
		fmt.Fprintf(&b, "VMI: phase %s conditions %+v\n", vmi.Status.Phase, vmi.Status.Conditions)
	} else {
		fmt.Fprintf(&b, "VMI: %v\n", err)
	}
	var dvs cdiv1.DataVolumeList
	if err := vc.List(ctx, &dvs, client.InNamespace(snapNS)); err == nil {
		for _, dv := range dvs.Items {
			fmt.Fprintf(&b, "DataVolume %s: phase %s conditions %+v\n", dv.Name, dv.Status.Phase, dv.Status.Conditions)
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := vc.List(ctx, &pvcs, client.InNamespace(snapNS)); err == nil {
		for _, p := range pvcs.Items {
			fmt.Fprintf(&b, "PVC %s: phase %s volume %s dataSource %+v\n", p.Name, p.Status.Phase, p.Spec.VolumeName, p.Spec.DataSource)
		}
	}
	var snaps snapshotv1.VirtualMachineSnapshotList
	if err := vc.List(ctx, &snaps, client.InNamespace(snapNS)); err == nil {
		for _, s := range snaps.Items {
			fmt.Fprintf(&b, "VirtualMachineSnapshot %s: %+v\n", s.Name, s.Status)
		}
	}
	var restores snapshotv1.VirtualMachineRestoreList
	if err := vc.List(ctx, &restores, client.InNamespace(snapNS)); err == nil {
		for _, r := range restores.Items {
			fmt.Fprintf(&b, "VirtualMachineRestore %s: %+v\n", r.Name, r.Status)
		}
	}
	if evs, err := e.Clientset.CoreV1().Events(snapNS).List(ctx, metaListAll); err == nil {
		for _, ev := range evs.Items {
			fmt.Fprintf(&b, "event %s/%s %s: %s\n", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	pods, _ := podsOf(ctx, e.Clientset, hcNamespace, agentSelector)
	for _, p := range pods {
		log, err := podLog(ctx, e.Clientset, hcNamespace, p.Name, "vm-agent", false)
		if err != nil {
			log = err.Error()
		}
		fmt.Fprintf(&b, "%s (vm-agent) log:\n%s\n", p.Name, tail(log, 4000))
	}
	serial := filepath.Join(agentStateDir, "serial", snapNS+"_"+vmSnapName+"-serial.log")
	fmt.Fprintf(&b, "serial log %s:\n%s\n", serial, tail(logFrom(serial, 0), 2000))
	return b.String()
}
