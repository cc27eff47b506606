package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/converge-dev/converge/internal/testing/vmtest"
	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

// recordingDisks is a DiskSetup that records its calls; fail makes
// Prepare fail. (The real one, vmdisks, is used by TestPreparedVolumes.)
type recordingDisks struct {
	calls []string
	fail  error
}

func (r *recordingDisks) Prepare(_ context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	r.calls = append(r.calls, "prepare "+vmi.Name)
	return r.fail
}

func (r *recordingDisks) Release(_, name string, _ types.UID) error {
	r.calls = append(r.calls, "release "+name)
	return nil
}

func (r *recordingDisks) Sweep(func(types.UID) bool) error { return nil }

func withVolumes(vmi *kubevirtv1.VirtualMachineInstance, vols ...kubevirtv1.Volume) *kubevirtv1.VirtualMachineInstance {
	for _, v := range vols {
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v)
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name})
	}
	return vmi
}

// TestPreparedVolumes runs a VMI with a cloudInitNoCloud and an emptyDisk
// volume through the agent with the real vmdisks: the files are made
// before the domain is defined, the domain has them as virtio disks
// (raw ISO, qcow2 image), and once the deleted VMI is reported Removed
// the VMI's directory is gone; the disks of a VMI neither listed nor with
// a domain are swept.
func TestPreparedVolumes(t *testing.T) {
	_, err := exec.LookPath("qemu-img")
	vmtest.Require(t, err == nil, "qemu-img not found: apt-get install -y --no-install-recommends qemu-utils")
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	disks, err := vmdisks.New(vmdisks.DefaultOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	o := options(clk)
	o.Disks, o.Domain.ResolveVolume = disks, disks.Resolve
	vmi := withVolumes(newVMI("ci", 30),
		kubevirtv1.Volume{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
		kubevirtv1.Volume{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("16Mi")}}})
	src := agent.NewStaticSource(vmi)
	a := agent.New(hv, o)
	settle(t, a, src)
	if got := src.Get("ns", "ci"); got.Status.Phase != kubevirtv1.Running {
		t.Fatalf("phase %s", got.Status.Phase)
	}
	d, err := hv.Lookup("ns_ci")
	if err != nil {
		t.Fatal(err)
	}
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(d.XML); err != nil {
		t.Fatal(err)
	}
	dir := disks.VMIDir("ns", "ci", vmi.UID)
	want := map[string]string{dir + "/cloudinit.iso": "raw", dir + "/scratch.qcow2": "qcow2"}
	for _, disk := range x.Devices.Disks {
		if disk.Source == nil || disk.Source.File == nil {
			continue
		}
		f := disk.Source.File.File
		if format, ok := want[f]; ok {
			if disk.Driver.Type != format || disk.Target.Bus != "virtio" {
				t.Errorf("disk %s: driver %s bus %s, want %s virtio", f, disk.Driver.Type, disk.Target.Bus, format)
			}
			if _, err := os.Stat(f); err != nil {
				t.Errorf("disk %s of the running domain: %v", f, err)
			}
			delete(want, f)
		}
	}
	if len(want) != 0 {
		t.Errorf("domain lacks disks %v:\n%s", want, d.XML)
	}

	// the disks of a VMI that went while the agent was away
	stray := withVolumes(newVMI("stray", 30), vmi.Spec.Volumes[0])
	if err := disks.Prepare(context.Background(), stray); err != nil {
		t.Fatal(err)
	}
	strayDir := disks.VMIDir("ns", "stray", stray.UID)
	settle(t, a, src)
	if _, err := os.Stat(strayDir); !os.IsNotExist(err) {
		t.Errorf("disks no VMI or domain claims (%s): %v", strayDir, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the running VMI's disks: %v", err)
	}

	src.Delete("ns", "ci", clk.now())
	res := a.Reconcile(src.List())
	if len(res.Errors) > 0 || len(res.Reports) != 1 || !res.Reports[0].Removed {
		t.Fatalf("delete: %+v", res)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("VMI directory %s after removal: %v", dir, err)
	}
}

// TestDiskHooks: Prepare runs after Build and before define; a failing
// Prepare defines nothing and leaves the VMI Scheduled, DiskSetupFailed,
// retried; one not ready yet (a pull in progress) leaves it Scheduled,
// VolumesNotReady, without an error; once Prepare succeeds it runs; a VMI refused by Build is never prepared
// but released; a guest that powers off has its disks released once its
// domain is gone, before the VMI is deleted.
func TestDiskHooks(t *testing.T) {
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	disks := &recordingDisks{fail: errors.New(`volume "root": image example/disk:1: 503 Service Unavailable`)}
	o := options(clk)
	o.Disks = disks
	src := agent.NewStaticSource(newVMI("job", 30))
	a := agent.New(hv, o)
	res := a.Reconcile(src.List())
	if len(res.Errors) != 1 || res.RequeueAfter != o.RetryAfter {
		t.Fatalf("failing Prepare: %+v", res)
	}
	st := res.Reports[0].Status
	if s, r := ready(st); st.Phase != kubevirtv1.Scheduled || s != "False" || r != "DiskSetupFailed" {
		t.Errorf("phase %s Ready %s/%s, want Scheduled False/DiskSetupFailed", st.Phase, s, r)
	}
	wantNoDomain(t, hv, "ns_job")
	src.Store(res.Reports[0])

	disks.fail = fmt.Errorf(`volume "root": image example/disk:1: pulling (for 12s): %w`, domain.ErrVolumeNotReady)
	res = a.Reconcile(src.List())
	if len(res.Errors) != 0 || res.RequeueAfter != o.RetryAfter {
		t.Fatalf("a pull in progress: %+v", res)
	}
	st = res.Reports[0].Status
	if s, r := ready(st); st.Phase != kubevirtv1.Scheduled || s != "False" || r != "VolumesNotReady" {
		t.Errorf("a pull in progress: phase %s Ready %s/%s, want Scheduled False/VolumesNotReady", st.Phase, s, r)
	}
	wantNoDomain(t, hv, "ns_job")
	src.Store(res.Reports[0])

	disks.fail = nil
	settle(t, a, src)
	if got := src.Get("ns", "job"); got.Status.Phase != kubevirtv1.Running {
		t.Fatalf("after a good Prepare: phase %s", got.Status.Phase)
	}
	if got := strings.Join(disks.calls, ", "); got != "prepare job, prepare job, prepare job" {
		t.Errorf("calls %q", got)
	}

	disks.calls = nil
	if err := hv.Shutdown("ns_job"); err != nil { // the guest powers off
		t.Fatal(err)
	}
	settle(t, a, src)
	settle(t, a, src)
	if got := src.Get("ns", "job"); got.Status.Phase != kubevirtv1.Succeeded {
		t.Fatalf("phase %s, want Succeeded", got.Status.Phase)
	}
	if got := strings.Join(disks.calls, ", "); got != "release job" {
		t.Errorf("calls after the guest powered off %q, want one release", got)
	}

	disks.calls = nil
	refused := newVMI("gpu", 30)
	refused.Spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "g", DeviceName: "x"}}
	settle(t, a, agent.NewStaticSource(refused))
	if got := strings.Join(disks.calls, ", "); got != "release gpu" {
		t.Errorf("calls for a refused VMI %q, want only a release", got)
	}
}

// TestVolumesNotReady: a VMI whose PVC is not ready (the resolver's error
// wraps domain.ErrVolumeNotReady) waits Scheduled, VolumesNotReady,
// retried, then runs once the claim resolves; a PVC the resolver refuses
// for good fails the VMI.
func TestVolumesNotReady(t *testing.T) {
	hv, clk := privateNode(t), &clock{t: time.Unix(1000, 0)}
	bound := false
	o := options(clk)
	o.Domain.ResolvePVC = func(namespace, claim string) (domain.DiskSource, error) {
		switch {
		case claim == "gone-for-good":
			return domain.DiskSource{}, fmt.Errorf("PersistentVolume pv-1 is on node node-9")
		case !bound:
			return domain.DiskSource{}, fmt.Errorf("PersistentVolumeClaim %s/%s: not bound yet (phase Pending): %w", namespace, claim, domain.ErrVolumeNotReady)
		}
		return domain.DiskSource{Path: "/pool/" + claim + "/data/disk.img"}, nil
	}
	pvc := func(name, claim string) *kubevirtv1.VirtualMachineInstance {
		v := kubevirtv1.Volume{Name: "root", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}}
		v.PersistentVolumeClaim.ClaimName = claim
		return withVolumes(newVMI(name, 30), v)
	}
	src := agent.NewStaticSource(pvc("db", "data"))
	a := agent.New(hv, o)
	res := a.Reconcile(src.List())
	st := res.Reports[0].Status
	if s, r := ready(st); st.Phase != kubevirtv1.Scheduled || s != "False" || r != "VolumesNotReady" || res.RequeueAfter != o.RetryAfter {
		t.Fatalf("phase %s Ready %s/%s requeue %v, want Scheduled False/VolumesNotReady after %v", st.Phase, s, r, res.RequeueAfter, o.RetryAfter)
	}
	for _, c := range st.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && !strings.Contains(c.Message, `claim "data": PersistentVolumeClaim ns/data: not bound yet`) {
			t.Errorf("Ready message %q", c.Message)
		}
	}
	src.Store(res.Reports[0])
	wantNoDomain(t, hv, "ns_db")
	bound = true
	settle(t, a, src)
	if got := src.Get("ns", "db"); got.Status.Phase != kubevirtv1.Running {
		t.Errorf("after the claim bound: phase %s", got.Status.Phase)
	}

	src2 := agent.NewStaticSource(pvc("lost", "gone-for-good"))
	settle(t, a, src2)
	if got := src2.Get("ns", "lost"); got.Status.Phase != kubevirtv1.Failed || got.Status.Reason != "Unsupported" {
		t.Errorf("a refused claim: phase %s reason %s, want Failed Unsupported", got.Status.Phase, got.Status.Reason)
	}
}
