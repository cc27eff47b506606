package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// diskGuest is one VMI of TestGuestBootsFromDisk: the guest's disk.img
// as a hostDisk, and, when iso is set, a NoCloud ISO as a second,
// read-only virtio disk.
type diskGuest struct {
	name string
	// userData and metaData make the NoCloud ISO; none when metaData is
	// "".
	userData, metaData string
	// wants are the console lines (substrings) the guest must print.
	wants []string
}

// diskVMIYAML is g as a VMI booting from its disk (no kernelBoot: the
// firmware boots disk.img's SYSLINUX), no NIC, 128 MiB; deleting adds a
// deletionTimestamp.
func diskVMIYAML(g diskGuest, disk, iso string, deleting bool) string {
	del := ""
	if deleting {
		del = "\n  deletionTimestamp: \"2026-01-01T00:00:00Z\""
	}
	disks := `      - name: rootdisk
        bootOrder: 1
        disk:
          bus: virtio
`
	volumes := fmt.Sprintf(`  - name: rootdisk
    hostDisk:
      path: %s
      type: Disk
`, disk)
	if iso != "" {
		disks += `      - name: cloudinitdisk
        disk:
          bus: virtio
          readonly: true
`
		volumes += fmt.Sprintf(`  - name: cloudinitdisk
    hostDisk:
      path: %s
      type: Disk
`, iso)
	}
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: %s
  namespace: %s%s
spec:
  terminationGracePeriodSeconds: 2
  domain:
    cpu:
      cores: 1
    memory:
      guest: 128Mi
    devices:
      autoattachMemBalloon: false
      autoattachPodInterface: false
      disks:
%s  volumes:
%s`, g.name, namespace, del, disks, volumes)
}

// TestGuestBootsFromDisk boots hack/guest's disk.img the way a VM boots
// an imported or containerDisk image: as a disk, with no kernelBoot, so
// the firmware (SeaBIOS) runs the SYSLINUX on it, which boots the kernel
// with converge.dhcp=1 converge.cloudinit=1. Through the real
// `converge-node vm` on a libvirtd of the test (TCG), three VMIs run:
//   - two with a NoCloud ISO (go-diskfs, as KubeVirt's cloudInitNoCloud
//     makes it) as a second, read-only virtio disk: the guest finds it by
//     its label, prints each line of the user data
//     (CONVERGE-GUEST-USERDATA, the test's marker among them; the last
//     line without a newline too) and takes its hostname from the
//     meta-data's local-hostname, JSON as KubeVirt writes it or YAML;
//   - one without: the guest says CONVERGE-GUEST-CLOUDINIT none and keeps
//     its default hostname.
//
// Every domain boots without a <kernel> element (the disk, not libvirt,
// holds the kernel); deleting the VMIs removes them. Boot latencies are
// logged, not asserted.
func TestGuestBootsFromDisk(t *testing.T) {
	l := vmtest.StartLibvirt(t)
	guestDir := vmtest.BuildGuest(t)
	bin := vmtest.BuildBinary(t, "./cmd/converge-node")
	marker := "DISK-BOOT-MARKER-" + fmt.Sprint(time.Now().UnixNano())
	guests := []diskGuest{
		{
			// meta-data as KubeVirt writes it (pkg/cloud-init: JSON)
			name:     "disk-nocloud",
			userData: "#cloud-config\nruncmd:\n  - echo " + marker + "\n",
			metaData: `{"instance-id":"disk-nocloud.converge-e2e","local-hostname":"from-meta-data"}`,
			wants: []string{guestimage.MarkerCloudInit + " nocloud /dev/vdb", guestimage.MarkerUserData + " #cloud-config",
				guestimage.MarkerUserData + "   - echo " + marker, guestimage.MarkerOK + " from-meta-data "},
		},
		{
			// meta-data as cloud-init's docs write it (YAML)
			name:     "disk-nocloud-yaml",
			userData: "#!/bin/sh\necho " + marker,
			metaData: "instance-id: disk-nocloud-yaml\nlocal-hostname: from-yaml\n",
			wants:    []string{guestimage.MarkerUserData + " echo " + marker, guestimage.MarkerOK + " from-yaml "},
		},
		{
			name:  "disk-plain",
			wants: []string{guestimage.MarkerCloudInit + " none", guestimage.MarkerOK + " converge-guest "},
		},
	}
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	var live, deleting []string
	for _, g := range guests {
		dom := namespace + "_" + g.name
		l.RemoveDomain(t, dom) // a leftover of an interrupted run
		t.Cleanup(func() { l.RemoveDomain(t, dom) })
		// each VM writes to a disk of its own, never to bin/guest
		disk := filepath.Join(dir, g.name+".img")
		copyFileT(t, filepath.Join(guestDir, guestimage.DiskImage), disk)
		iso := ""
		if g.metaData != "" {
			iso = filepath.Join(dir, g.name+"-nocloud.iso")
			if err := guestimage.NoCloudISO(iso, g.userData, g.metaData); err != nil {
				t.Fatal(err)
			}
		}
		live = append(live, diskVMIYAML(g, disk, iso, false))
		deleting = append(deleting, diskVMIYAML(g, disk, iso, true))
	}
	liveFile, deletingFile := filepath.Join(dir, "vmis.yaml"), filepath.Join(dir, "vmis-deleting.yaml")
	writeFile(t, liveFile, strings.Join(live, "---\n"))
	writeFile(t, deletingFile, strings.Join(deleting, "---\n"))

	start := time.Now()
	agent := startAgent(t, bin, liveFile, stateDir, l)
	var running []string
	for _, g := range guests {
		running = append(running, namespace+"/"+g.name+" Running ready=True")
	}
	agent.awaitAll(t, running, 120*time.Second)
	for _, g := range guests {
		dom := namespace + "_" + g.name
		if xml, err := l.Virsh("dumpxml", dom); err != nil {
			t.Errorf("virsh dumpxml %s: %v", dom, err)
		} else if strings.Contains(xml, "<kernel>") {
			t.Errorf("domain %s has a <kernel>: the guest must boot from its disk", dom)
		}
		serialLog := filepath.Join(stateDir, "serial", dom+"-serial.log")
		for _, want := range g.wants {
			at := waitForLog(t, serialLog, want, 180*time.Second)
			t.Logf("%s: %q on the console %s after the agent started", g.name, want, at.Sub(start).Round(time.Millisecond))
		}
	}
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v", err)
	}

	agent = startAgent(t, bin, deletingFile, stateDir, l)
	var removed []string
	for _, g := range guests {
		removed = append(removed, namespace+"/"+g.name+" removed")
	}
	agent.awaitAll(t, removed, 60*time.Second)
	if err := agent.stop(t); err != nil {
		t.Errorf("converge-node vm on SIGTERM: %v", err)
	}
	if doms := l.Domains(t); len(doms) != 0 {
		t.Errorf("virsh list --all on the test's libvirtd: %q, want nothing", doms)
	}
}

// waitForLog polls the file at path every 100 ms until it contains want
// and gives the time it did; after guard (a hang guard) it fails the
// test with the file's tail.
func waitForLog(t *testing.T, path, want string, guard time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !logHas(path, want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %s within %s; its tail:\n%s", want, path, guard, tailFile(path))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Now()
}

// copyFileT copies from to to.
func copyFileT(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
