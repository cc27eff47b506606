package cluster_test

import (
	"bytes"
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
)

// snapNS is TestVMSnapshotRestore's namespace, made and removed by it.
const snapNS = "vm-snapshot"

// TestVMSnapshotRestore is issue 21's VM snapshot and restore on the real
// cluster, the disk changed by the guest itself. The VM (runStrategy
// Always, no NIC) has a root disk and a data disk (vdb) from
// dataVolumeTemplates, imported over HTTP, the data disk holding the OLD
// marker (guestimage.DataDisk), and a cloudInitNoCloud disk. Steps: the
// guest prints the data disk's OLD marker at boot; a
// VirtualMachineSnapshot of the running VM reaches phase Succeeded,
// readyToUse, with both disks included and the Online and NoGuestAgent
// indications; the VM is stopped, its user data gets the directive to
// write the NEW marker onto vdb (guestimage.WriteDirective), and started
// again the guest prints OLD at boot, then writes NEW and says so. While
// it runs, a VirtualMachineRestore of the snapshot whose target is a VM
// that does not exist yet (KubeVirt's restore to a new VM) completes:
// the new VM is created Halted on restored claims, and started it prints
// the OLD marker and writes nothing (its spec is the snapshot's), while
// the original VM keeps its VMI and its DataVolume. The original,
// stopped, holds NEW on its data disk (read on the node); a restore into
// it completes, its data disk is the restored claim and its user data
// the snapshot's, and started again its guest prints OLD and writes
// nothing. The namespace and what is in it go at the end.
func TestVMSnapshotRestore(t *testing.T) {
	v := startVMTest(t, 25*time.Minute, snapshotv1.AddToScheme)
	e, ctx, guestDir, vc := v.e, v.ctx, v.guestDir, v.vc

	// The files served: the guest's disk and the data disk with OLD.
	id := randomHex(t)[:12]
	oldMarker, newMarker := "SNAP-OLD-"+id, "SNAP-NEW-"+id
	dir := t.TempDir()
	disk, err := os.ReadFile(filepath.Join(guestDir, guestimage.DiskImage))
	if err != nil {
		t.Fatal(err)
	}
	const dataImage = "data.img"
	for name, body := range map[string][]byte{guestimage.DiskImage: disk, dataImage: guestimage.DataDisk(oldMarker, 1<<20)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := guestimage.ServeFiles(t, localcluster.NodeIP+":0", dir, guestimage.DiskImage, dataImage)

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
	orig := snapGuest{name: vmSnapName}
	orig.mark()
	vm := vmSnapVM(files.FileURL(guestimage.DiskImage), files.FileURL(dataImage))
	if err := vc.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}

	// 1. The VM runs and its guest shows the OLD content of its data disk.
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
	orig.boots(st, ctx, vc, oldMarker, "")

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

	// 3. Stopped, the VM's user data told to write NEW; started, the
	// guest shows OLD at boot and writes NEW onto its data disk.
	orig.stop(st, ctx, vc)
	patch := fmt.Sprintf(`[{"op":"test","path":"/spec/template/spec/volumes/2/name","value":"cloudinitdisk"},`+
		`{"op":"replace","path":"/spec/template/spec/volumes/2/cloudInitNoCloud/userData","value":%q}]`, snapUserData(guestimage.WriteDirective("vdb", newMarker)))
	st.do("the VM's user data takes the directive to write NEW", time.Minute, func() (bool, string) {
		err := vc.Patch(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: vmSnapName}}, client.RawPatch(types.JSONPatchType, []byte(patch)))
		return err == nil, fmt.Sprint(err)
	})
	orig.mark()
	orig.setRunStrategy(st, ctx, vc, kubevirtv1.RunStrategyAlways)
	running := orig.boots(st, ctx, vc, oldMarker, newMarker)

	// 4. While it runs, the restore into a new VM; started, the new VM
	// shows OLD and writes nothing; the original keeps running as it was.
	const copyName = "snap-copy"
	toCopy := restoreOf(t, st, ctx, vc, snap.Name, "to-copy", copyName)
	cp := snapGuest{name: copyName}
	copyVM := &kubevirtv1.VirtualMachine{}
	st.do("the new VM "+copyName+" is Halted on the restored claims", time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: copyName}, copyVM); err != nil {
			return false, err.Error()
		}
		rs, _ := copyVM.RunStrategy()
		return rs == kubevirtv1.RunStrategyHalted && onRestoredClaim(copyVM, toCopy, "rootdisk") && onRestoredClaim(copyVM, toCopy, "datadisk"),
			fmt.Sprintf("runStrategy %s volumes %+v restores %+v", rs, copyVM.Spec.Template.Spec.Volumes, toCopy.Status.Restores)
	})
	cp.mark()
	cp.setRunStrategy(st, ctx, vc, kubevirtv1.RunStrategyAlways)
	cp.boots(st, ctx, vc, oldMarker, "")
	cp.setRunStrategy(st, ctx, vc, kubevirtv1.RunStrategyHalted)
	st.do("the original VM is unaffected: the same VMI running, its data disk the DataVolume "+dataDV, time.Second, func() (bool, string) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: vmSnapName}, vmi); err != nil {
			return false, err.Error()
		}
		if err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: vmSnapName}, vm); err != nil {
			return false, err.Error()
		}
		v := volumeNamed(vm, "datadisk")
		return vmi.UID == running.UID && vmi.Status.Phase == kubevirtv1.Running && v != nil && v.DataVolume != nil && v.DataVolume.Name == dataDV,
			fmt.Sprintf("VMI %s (was %s) phase %s, datadisk %+v", vmi.UID, running.UID, vmi.Status.Phase, v)
	})

	// 5. The original stopped holds NEW; restored into itself and
	// started, it shows OLD and writes nothing.
	orig.stop(st, ctx, vc)
	st.do("the original's data disk holds the guest's NEW marker", time.Second, func() (bool, string) {
		b, err := os.ReadFile(dataDiskImage(t, ctx, vc, dataDV))
		if err != nil {
			return false, err.Error()
		}
		b = b[:min(len(b), 512)]
		return bytes.HasPrefix(b, []byte(guestimage.DataPrefix+newMarker+"\n")), fmt.Sprintf("first sector %q", bytes.TrimRight(b, "\x00"))
	})
	inPlace := restoreOf(t, st, ctx, vc, snap.Name, "in-place", vmSnapName)
	st.do("the VM's data disk is the restored claim and its user data the snapshot's", time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: vmSnapName}, vm); err != nil {
			return false, err.Error()
		}
		ci := volumeNamed(vm, "cloudinitdisk")
		return onRestoredClaim(vm, inPlace, "datadisk") && ci != nil && ci.CloudInitNoCloud != nil && ci.CloudInitNoCloud.UserData == snapUserData(),
			fmt.Sprintf("volumes %+v, restores %+v", vm.Spec.Template.Spec.Volumes, inPlace.Status.Restores)
	})
	orig.mark()
	orig.setRunStrategy(st, ctx, vc, kubevirtv1.RunStrategyAlways)
	orig.boots(st, ctx, vc, oldMarker, "")
}

// snapGuest is a VM of TestVMSnapshotRestore and where its serial log
// was when mark was last called.
type snapGuest struct {
	name     string
	logStart int64
}

// serial is the agent's serial log of the VM's guest.
func (g *snapGuest) serial() string {
	return filepath.Join(agentStateDir, "serial", snapNS+"_"+g.name+"-serial.log")
}

// mark makes boots look only at what the guest prints from now on.
func (g *snapGuest) mark() { g.logStart = fileSize(g.serial()) }

// boots waits for the VMI to run, Ready, and for its guest to print, since
// mark, its name and the data disk's marker data at boot; with write, the
// guest's confirmation that it wrote write onto vdb, else it must not
// say it wrote anything. It gives the VMI.
func (g *snapGuest) boots(st *step, ctx context.Context, vc client.Client, data, write string) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	start := time.Now()
	st.do("the VMI "+g.name+" runs, Ready", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: g.name}, vmi); err != nil {
			return false, "VMI: " + err.Error()
		}
		return vmi.Status.Phase == kubevirtv1.Running && vmiReady(vmi), fmt.Sprintf("phase %s conditions %+v", vmi.Status.Phase, vmi.Status.Conditions)
	})
	what := "the guest of " + g.name + " prints its data disk's " + data + " at boot"
	if write != "" {
		what += ", then writes " + write
	}
	st.do(what, 5*time.Minute, func() (bool, string) {
		// the console ends its lines with CR LF
		log := strings.ReplaceAll(logFrom(g.serial(), g.logStart), "\r\n", "\n")
		if write == "" && strings.Contains(log, guestimage.MarkerWrote) {
			st.stop("the guest wrote onto a disk: %s", tail(log, 1500))
		}
		ok := strings.Contains(log, guestimage.MarkerData+" vdb "+data+"\n") && strings.Contains(log, guestimage.MarkerOK+" "+g.name+" ")
		if write != "" {
			ok = ok && strings.Contains(log, guestimage.MarkerWrote+" vdb "+write+"\n")
		}
		return ok, g.serial() + ": " + tail(log, 1500)
	})
	st.t.Logf("%s: %v after the VMI was asked for", what, time.Since(start).Round(time.Millisecond))
	return vmi
}

// setRunStrategy sets the VM's run strategy, as virtctl start and stop do.
func (g *snapGuest) setRunStrategy(st *step, ctx context.Context, vc client.Client, rs kubevirtv1.VirtualMachineRunStrategy) {
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: g.name}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"runStrategy":"`+string(rs)+`"}}`))
	st.do("the VM "+g.name+" takes runStrategy "+string(rs), time.Minute, func() (bool, string) {
		err := vc.Patch(ctx, vm, patch)
		return err == nil, fmt.Sprint(err)
	})
}

// stop halts the VM and waits for its VMI to go.
func (g *snapGuest) stop(st *step, ctx context.Context, vc client.Client) {
	g.setRunStrategy(st, ctx, vc, kubevirtv1.RunStrategyHalted)
	st.do("the VMI "+g.name+" is gone", 3*time.Minute, func() (bool, string) {
		err := vc.Get(ctx, client.ObjectKey{Namespace: snapNS, Name: g.name}, &kubevirtv1.VirtualMachineInstance{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// restoreOf creates the VirtualMachineRestore name of snapshot snap into
// the VM target and waits for it to complete; it gives the restore.
func restoreOf(t *testing.T, st *step, ctx context.Context, vc client.Client, snap, name, target string) *snapshotv1.VirtualMachineRestore {
	t.Helper()
	apiGroup := kubevirtv1.SchemeGroupVersion.Group
	r := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: snapNS, Name: name},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: target},
			VirtualMachineSnapshotName: snap}}
	if err := vc.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st.do("the VirtualMachineRestore "+name+" into "+target+" completes", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err.Error()
		}
		s := r.Status
		return s != nil && s.Complete != nil && *s.Complete, fmt.Sprintf("%+v", s)
	})
	t.Logf("VirtualMachineRestore %s complete %v after its creation", name, time.Since(start).Round(time.Millisecond))
	return r
}

// volumeNamed gives vm's volume name, or nil.
func volumeNamed(vm *kubevirtv1.VirtualMachine, name string) *kubevirtv1.Volume {
	for i, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &vm.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// onRestoredClaim reports whether vm's volume is the claim r restored
// for it.
func onRestoredClaim(vm *kubevirtv1.VirtualMachine, r *snapshotv1.VirtualMachineRestore, volume string) bool {
	v := volumeNamed(vm, volume)
	if v == nil || v.PersistentVolumeClaim == nil || r.Status == nil {
		return false
	}
	for _, vr := range r.Status.Restores {
		if vr.VolumeName == volume {
			return vr.PersistentVolumeClaimName != "" && v.PersistentVolumeClaim.ClaimName == vr.PersistentVolumeClaimName
		}
	}
	return false
}

// snapUserData is the user data of TestVMSnapshotRestore's VM with the
// given lines.
func snapUserData(lines ...string) string {
	s := "#cloud-config\n"
	for _, l := range lines {
		s += l + "\n"
	}
	return s
}

// vmSnapName is TestVMSnapshotRestore's VM.
const vmSnapName = "snap-vm"

// vmSnapVM is TestVMSnapshotRestore's VM in snapNS: runStrategy Always,
// no NIC, a root disk (vda) imported from rootURL and a data disk (vdb)
// imported from dataURL, both dataVolumeTemplates of 64Mi on the
// hostpath class, and a cloudInitNoCloud disk (vdc) with no directive.
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
					Devices: kubevirtv1.Devices{AutoattachPodInterface: &no, Disks: []kubevirtv1.Disk{disk("rootdisk"), disk("datadisk"), disk("cloudinitdisk")}},
				},
				Volumes: []kubevirtv1.Volume{dv("rootdisk", vmSnapName+"-root"), dv("datadisk", vmSnapName+"-data"),
					{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: snapUserData()}}}},
			}},
		},
	}
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
	for _, g := range []snapGuest{{name: vmSnapName}, {name: "snap-copy"}} {
		fmt.Fprintf(&b, "serial log %s:\n%s\n", g.serial(), tail(logFrom(g.serial(), 0), 2000))
	}
	return b.String()
}
