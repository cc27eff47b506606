package cluster_test

import (
	"context"
	"fmt"
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
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/internal/testing/virtctltest"
)

// TestVMChain is issue 15's whole chain on the real cluster, from Git to a
// booted guest and back. The example's config repository gets, beside its
// HyperConverged and HostPathProvisioner, a Namespace and a
// NetworkAttachmentDefinition on a Linux bridge, then one VirtualMachine
// at a time, as KubeVirt's users write them: runStrategy Always, a
// cloudInitNoCloud disk whose user data holds a marker, the default pod
// network (masquerade) and the bridge network, and a root disk that is
// hack/guest's disk.img (SYSLINUX boots its kernel with converge.dhcp=1
// converge.cloudinit=1):
//   - "dataVolumeTemplates over HTTP": a DataVolume the VM owns, imported
//     from a file server on the node address into a hostpath volume;
//   - "containerDisk from a registry": disk.qcow2 as a containerDisk image
//     pushed to an OCI registry in the test process on 127.0.0.1 (the
//     agent runs on the host network).
//
// Each goes through the same steps, each failing with its number, its
// name and what it saw last: the Sync takes the commit; the VM is there;
// its disk reaches the node (the DataVolume imports, Succeeded, into a
// bound PVC whose volume holds the image; or the registry serves the
// image and the node caches it by digest); the VMI runs and is Ready, a
// domain of the agent's libvirtd; the guest prints the user data's marker
// and the meta-data's hostname (its name) on its serial console; it gets
// its addresses by DHCP on the pod network (KubeVirt's masquerade address)
// and on the bridge (an address of the NAD's range); `converge vm
// console` reads its marker; the Sync is Ready at the commit (the VM is
// healthy); for the DataVolume, its PVC's request raised from 64Mi to
// 128Mi reaches the running guest, which sees its root disk grow
// (expandRootDisk); a commit changing the VM's memory is applied to the VM, and
// after `converge vm restart` its new VMI has that memory, as its domain;
// a commit removing the VM prunes the VM, its VMI, DataVolume, PVC and
// PV, and leaves nothing of it on the node (no domain in the agent's
// libvirtd, no QEMU, no directory of the VMI's disks, no network
// namespace, no volume directory in the pool). The Namespace and the NAD
// are removed at the end. The node's bridge is made by the test, as a
// KubeVirt admin makes it (bridge-marker advertises it to the scheduler),
// and deleted at the end.
//
// The HyperConverged first gets the annotations that tell converge where
// the local cluster's runtime keeps its CNI directories (its work
// directory, not /etc/cni/net.d), and loses them at the end.
//
// It needs the work of issue 15 on workloads from Git, the node's disks
// (containerDisk, cloud-init, dataVolume volumes), the pod network with
// DHCP and dataVolumeTemplates; until all of it is there a step fails and
// says which.
func TestVMChain(t *testing.T) {
	v := startVMTest(t, 30*time.Minute)
	e, repo, ctx, guestDir, vc := v.e, v.repo, v.ctx, v.guestDir, v.vc

	// The sources: pods reach the file server at the node address (the
	// cdi-importer runs on the host network, but a pod network importer
	// would too); the agent pulls from the registry on loopback (plain
	// HTTP only there).
	files := guestimage.ServeFiles(t, localcluster.NodeIP+":0", guestDir, guestimage.DiskImage, guestimage.DiskQCOW2)
	reg := guestimage.StartRegistry(t, "127.0.0.1:0")
	img, err := guestimage.ContainerDisk(filepath.Join(guestDir, guestimage.DiskQCOW2))
	if err != nil {
		t.Fatal(err)
	}
	ref, digest, err := reg.Push("converge/guest", "e2e", img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sources: %s; containerDisk %s (%s)", files.FileURL(guestimage.DiskImage), ref, digest)

	// The namespace and the bridge network stay for both VMs; removed at
	// the end (and the bridge from the node: the bridge plugin leaves it).
	defer func() {
		sha := commit(t, ctx, e, repo, "vm chain: no namespace", map[string]string{chainNetFile: ""})
		st := &step{t: t, prefix: "cleanup "}
		st.do("the Sync prunes the chain's Namespace and NAD", 5*time.Minute, syncApplied(ctx, e, sha))
		st.do("the Namespace "+chainNS+" is gone", 3*time.Minute, func() (bool, string) {
			err := e.Client.Get(ctx, client.ObjectKey{Name: chainNS}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		deleteLink(t, chainBridge)
		waitSyncReady(t, ctx, e)
	}()
	// The local cluster's runtime keeps its CNI configuration, plugins and
	// host-local leases under its own directories: the HyperConverged
	// says where (README, "the pod network"), so the VM agent attaches
	// VMIs to the same pod network; removed at the end.
	hc := podNetworkHC(t, repo, e)
	hcSHA := commit(t, ctx, e, repo, "vm chain: the nodes' pod network directories", map[string]string{hcFile: hc.with})
	defer func() {
		sha := commit(t, ctx, e, repo, "vm chain: no pod network directories", map[string]string{hcFile: hc.without})
		st := &step{t: t, prefix: "cleanup "}
		st.do("the Sync applies the HyperConverged without the pod network directories", 5*time.Minute, syncApplied(ctx, e, sha))
	}()
	st := &step{t: t}
	st.do("the Sync applies the HyperConverged with the pod network directories (the VM agent rolled)", 5*time.Minute, syncApplied(ctx, e, hcSHA))

	// The bridge is the node's, made by its admin as for KubeVirt's bridge
	// binding (nmstate or by hand): bridge-marker advertises it as a node
	// resource, which VMIs on the NAD request.
	addBridge(t, chainBridge)
	netSHA := commit(t, ctx, e, repo, "vm chain: namespace and bridge network", map[string]string{chainNetFile: chainNetworkYAML()})
	st.do("bridge-marker advertises the node's bridge "+chainBridge, 2*time.Minute, func() (bool, string) {
		n := &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: e.Cluster.NodeName}, n); err != nil {
			return false, err.Error()
		}
		q, ok := n.Status.Allocatable[corev1.ResourceName(bridgeResource)]
		return ok && !q.IsZero(), fmt.Sprintf("allocatable %v", n.Status.Allocatable)
	})
	st.do("the Sync takes the Namespace and the NAD", 2*time.Minute, syncTook(st, ctx, e, netSHA))
	st.do("the Sync applies the Namespace and the NAD", 3*time.Minute, syncApplied(ctx, e, netSHA))

	for _, c := range []chainCase{
		{name: "dataVolumeTemplates over HTTP", vm: "chain-dv", dataVolume: "chain-dv-root", diskURL: files.FileURL(guestimage.DiskImage)},
		{name: "containerDisk from a registry", vm: "chain-cd", image: ref},
	} {
		t.Run(c.name, func(t *testing.T) {
			runChain(t, ctx, e, vc, repo, c, func() (bool, string) {
				if c.dataVolume != "" {
					n := files.Requests(guestimage.DiskImage)
					return n > 0, fmt.Sprintf("%d requests for %s", n, guestimage.DiskImage)
				}
				n := reg.Manifests.Load()
				return n > 0, fmt.Sprintf("%d manifest requests to the registry", n)
			}, digest.Hex)
		})
	}
}

// runChain runs the chain of one VM (TestVMChain). served reports
// whether the VM's disk source was read; digestHex is the containerDisk
// image's digest, which names its copy in the node's cache.
func runChain(t *testing.T, ctx context.Context, e *cluster.Env, vc client.Client, repo *gitserver.Repo, c chainCase,
	served func() (bool, string), digestHex string) {
	marker := "CHAIN-MARKER-" + randomHex(t)[:12]
	key := client.ObjectKey{Namespace: chainNS, Name: c.vm}
	st := &step{t: t}

	removed := false
	defer func() {
		if !removed { // after a failure: the next case and tests start clean
			commit(t, ctx, e, repo, "vm chain: no "+c.vm, map[string]string{c.file(): ""})
		}
	}()
	defer func() {
		if t.Failed() {
			t.Logf("after a failure:\n%s", chainState(ctx, e, vc, c))
		}
	}()
	// the agent's serial logs outlive VMIs (and test runs): only what is
	// written from now on counts
	logStart := fileSize(c.serialLog())
	sha := commit(t, ctx, e, repo, "vm chain: "+c.vm, map[string]string{c.file(): c.vmYAML(chainMemory, marker)})
	st.do("the Sync takes the commit of the VM", 2*time.Minute, syncTook(st, ctx, e, sha))

	vm := &kubevirtv1.VirtualMachine{}
	st.do("the VirtualMachine from Git is in the cluster", time.Minute, func() (bool, string) {
		err := vc.Get(ctx, key, vm)
		return err == nil, fmt.Sprint(err)
	})

	var volumeID string
	if c.dataVolume != "" {
		dv := &cdiv1.DataVolume{}
		st.do("the VM controller creates the DataVolume of dataVolumeTemplates, owned by the VM", 2*time.Minute, func() (bool, string) {
			if err := vc.Get(ctx, client.ObjectKey{Namespace: chainNS, Name: c.dataVolume}, dv); err != nil {
				return false, err.Error()
			}
			for _, o := range dv.OwnerReferences {
				if o.Kind == "VirtualMachine" && o.Name == c.vm && o.UID == vm.UID && o.Controller != nil && *o.Controller {
					return true, ""
				}
			}
			return false, fmt.Sprintf("ownerReferences %+v, want the VM %s (uid %s) as controller", dv.OwnerReferences, c.vm, vm.UID)
		})
		st.do("the DataVolume imports the disk over HTTP (Succeeded, 100.0%)", 5*time.Minute, func() (bool, string) {
			if err := vc.Get(ctx, client.ObjectKeyFromObject(dv), dv); err != nil {
				return false, err.Error()
			}
			if dv.Status.Phase == cdiv1.Failed {
				st.stop("DataVolume %s/%s Failed: %+v", chainNS, c.dataVolume, dv.Status.Conditions)
			}
			return dv.Status.Phase == cdiv1.Succeeded && dv.Status.Progress == "100.0%", fmt.Sprintf("phase %s progress %s conditions %+v", dv.Status.Phase, dv.Status.Progress, dv.Status.Conditions)
		})
		st.do("the file server served the disk", 10*time.Second, served)
		pvc := &corev1.PersistentVolumeClaim{}
		pv := &corev1.PersistentVolume{}
		st.do("its PVC is bound to a hostpath volume holding the image", time.Minute, func() (bool, string) {
			if err := vc.Get(ctx, client.ObjectKey{Namespace: chainNS, Name: c.dataVolume}, pvc); err != nil {
				return false, "PVC: " + err.Error()
			}
			if pvc.Status.Phase != corev1.ClaimBound {
				return false, "PVC " + string(pvc.Status.Phase)
			}
			if err := vc.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
				return false, "PV: " + err.Error()
			}
			if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csiDriverName {
				return false, fmt.Sprintf("PV %s source %+v, want the %s driver", pv.Name, pv.Spec.PersistentVolumeSource, csiDriverName)
			}
			volumeID = pv.Spec.CSI.VolumeHandle
			img := filepath.Join(poolPath, volumeID, "data", "disk.img") // the driver's layout, CDI's file name
			if fileSize(img) == 0 {
				return false, img + " missing or empty; under the volume: " + strings.Join(findUnder(filepath.Join(poolPath, volumeID), ""), " ")
			}
			return true, ""
		})
	}

	vmi := &kubevirtv1.VirtualMachineInstance{}
	st.do("the VMI runs, Ready, on the node", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, key, vmi); err != nil {
			return false, "VMI: " + err.Error()
		}
		return vmi.Status.Phase == kubevirtv1.Running && vmiReady(vmi) && vmi.Status.NodeName == e.Cluster.NodeName,
			fmt.Sprintf("phase %s node %q conditions %+v", vmi.Status.Phase, vmi.Status.NodeName, vmi.Status.Conditions)
	})
	uids := []types.UID{vmi.UID}
	st.do("its domain runs in the agent's libvirtd", time.Minute, func() (bool, string) {
		uri, err := agentLibvirtURI(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		out, err := virsh(uri, "domstate", c.domain())
		return err == nil && strings.TrimSpace(out) == "running", fmt.Sprintf("%q %v", strings.TrimSpace(out), err)
	})
	if c.dataVolume == "" {
		st.do("the registry served the image", 10*time.Second, served)
		st.do("the node caches the image by its digest", 10*time.Second, func() (bool, string) {
			found := findUnder(filepath.Join(agentStateDir, "containerdisks"), digestHex)
			return len(found) > 0, "nothing under " + filepath.Join(agentStateDir, "containerdisks") + " names " + digestHex
		})
	}

	st.do("the guest prints its cloud-init user data and its name from the meta-data on the serial console", 5*time.Minute, func() (bool, string) {
		log := logFrom(c.serialLog(), logStart)
		ok := strings.Contains(log, markerLine(marker)) && strings.Contains(log, guestimage.MarkerCloudInit+" nocloud ") &&
			strings.Contains(log, guestimage.MarkerOK+" "+c.vm+" ")
		return ok, c.serialLog() + ": " + tail(log, 1500)
	})
	st.do("the guest gets its addresses by DHCP: KubeVirt's masquerade address on the pod network, one of the NAD's range on the bridge", 2*time.Minute, func() (bool, string) {
		leases := dhcpLeases(logFrom(c.serialLog(), logStart), c.vm)
		pod := leases[podGuestCIDR] == podGateway
		bridge := false
		for ip := range leases {
			bridge = bridge || inSubnet(ip, chainSubnet)
		}
		return pod && bridge, fmt.Sprintf("leases (ip → router) %v, want %s → %s and one in %s", leases, podGuestCIDR, podGateway, chainSubnet)
	})
	st.do("converge vm console reads the guest's marker", 2*time.Minute, func() (bool, string) {
		_, err := e.ReadConsole(ctx, chainNS, c.vm, guestimage.MarkerOK+" "+c.vm+" ", 60*time.Second)
		return err == nil, fmt.Sprint(err)
	})
	virtctl := virtctltest.Path(t)
	st.do("the upstream virtctl console reads the guest's marker too", 2*time.Minute, func() (bool, string) {
		_, err := e.ReadConsoleVirtctl(ctx, virtctl, chainNS, c.vm, guestimage.MarkerOK+" "+c.vm+" ", 60*time.Second)
		return err == nil, fmt.Sprint(err)
	})
	st.do("the Sync is Ready at the commit (the VM healthy)", 3*time.Minute, syncApplied(ctx, e, sha))
	if c.dataVolume != "" {
		expandRootDisk(ctx, st, vc, c)
	}

	// memory: the VM takes the commit; a restart makes a VMI with it
	sha = commit(t, ctx, e, repo, "vm chain: "+c.vm+" memory "+chainMemoryAfter, map[string]string{c.file(): c.vmYAML(chainMemoryAfter, marker)})
	st.do("the Sync takes the memory commit", 2*time.Minute, syncTook(st, ctx, e, sha))
	want := resource.MustParse(chainMemoryAfter)
	st.do("the VM's template has the new memory", time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, key, vm); err != nil {
			return false, err.Error()
		}
		m := vm.Spec.Template.Spec.Domain.Memory
		return m != nil && m.Guest != nil && m.Guest.Cmp(want) == 0, fmt.Sprintf("memory %+v", m)
	})
	before := fileSize(c.serialLog())
	if r := e.Converge(ctx, "vm", "restart", c.vm, "-n", chainNS); r.Err != nil {
		t.Fatalf("step %d+, restarting the VM: %s", st.n, r)
	}
	old := vmi.UID
	st.do("after converge vm restart, a new VMI runs with the new memory", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, key, vmi); err != nil {
			return false, "VMI: " + err.Error()
		}
		m := vmi.Spec.Domain.Memory
		return vmi.UID != old && vmi.Status.Phase == kubevirtv1.Running && m != nil && m.Guest != nil && m.Guest.Cmp(want) == 0,
			fmt.Sprintf("uid %s (old %s) phase %s memory %+v", vmi.UID, old, vmi.Status.Phase, m)
	})
	uids = append(uids, vmi.UID)
	st.do("its domain has the new memory", time.Minute, func() (bool, string) {
		uri, err := agentLibvirtURI(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		out, err := virsh(uri, "dominfo", c.domain())
		return err == nil && strings.Contains(out, fmt.Sprintf("Max memory:     %d KiB", chainMemoryAfterKiB)), fmt.Sprintf("%v %s", err, out)
	})
	st.do("the restarted guest boots again", 5*time.Minute, func() (bool, string) {
		log := logFrom(c.serialLog(), before)
		return strings.Contains(log, markerLine(marker)) && strings.Contains(log, guestimage.MarkerOK+" "+c.vm+" "), tail(log, 1500)
	})
	st.do("the Sync is Ready at the memory commit", 3*time.Minute, syncApplied(ctx, e, sha))

	// prune: the VM goes with what it owns, on the cluster and the node
	sha = commit(t, ctx, e, repo, "vm chain: no "+c.vm, map[string]string{c.file(): ""})
	removed = true
	st.do("the Sync applies the removal", 5*time.Minute, syncApplied(ctx, e, sha))
	st.do("the VM, its VMI, DataVolume, PVC and PV are gone", 5*time.Minute, func() (bool, string) {
		var left []string
		objs := []client.Object{&kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}}
		names := []client.ObjectKey{key, key}
		if c.dataVolume != "" {
			objs = append(objs, &cdiv1.DataVolume{}, &corev1.PersistentVolumeClaim{})
			names = append(names, client.ObjectKey{Namespace: chainNS, Name: c.dataVolume}, client.ObjectKey{Namespace: chainNS, Name: c.dataVolume})
		}
		for i, o := range objs {
			if err := vc.Get(ctx, names[i], o); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v)", o, names[i], err))
			}
		}
		if volumeID != "" {
			var pvs corev1.PersistentVolumeList
			if err := vc.List(ctx, &pvs); err != nil {
				return false, err.Error()
			}
			for _, pv := range pvs.Items {
				if pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle == volumeID {
					left = append(left, "PV "+pv.Name)
				}
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	st.do("nothing of the VM is left on the node", 3*time.Minute, func() (bool, string) {
		left := nodeLeftovers(ctx, e, c.domain(), uids, volumeID)
		return len(left) == 0, strings.Join(left, ", ")
	})
}

// vmiReady tells whether the VMI's Ready condition is True.
func vmiReady(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// chainState describes, for a failure, the chain's VM, VMI and
// DataVolume, the events of its namespace and the end of the VM agent's
// log.
func chainState(ctx context.Context, e *cluster.Env, vc client.Client, c chainCase) string {
	var b strings.Builder
	key := client.ObjectKey{Namespace: chainNS, Name: c.vm}
	vm := &kubevirtv1.VirtualMachine{}
	if err := vc.Get(ctx, key, vm); err == nil {
		fmt.Fprintf(&b, "VM %s: printableStatus %s ready %v conditions %+v\n", key, vm.Status.PrintableStatus, vm.Status.Ready, vm.Status.Conditions)
	} else {
		fmt.Fprintf(&b, "VM %s: %v\n", key, err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := vc.Get(ctx, key, vmi); err == nil {
		fmt.Fprintf(&b, "VMI %s: phase %s node %q conditions %+v interfaces %+v\n", key, vmi.Status.Phase, vmi.Status.NodeName, vmi.Status.Conditions, vmi.Status.Interfaces)
	} else {
		fmt.Fprintf(&b, "VMI %s: %v\n", key, err)
	}
	if c.dataVolume != "" {
		dv := &cdiv1.DataVolume{}
		if err := vc.Get(ctx, client.ObjectKey{Namespace: chainNS, Name: c.dataVolume}, dv); err == nil {
			fmt.Fprintf(&b, "DataVolume %s: phase %s progress %s conditions %+v\n", dv.Name, dv.Status.Phase, dv.Status.Progress, dv.Status.Conditions)
		} else {
			fmt.Fprintf(&b, "DataVolume %s: %v\n", c.dataVolume, err)
		}
	}
	if evs, err := e.Clientset.CoreV1().Events(chainNS).List(ctx, metaListAll); err == nil {
		for _, ev := range evs.Items {
			fmt.Fprintf(&b, "event %s/%s %s: %s\n", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	if s, err := getSync(ctx, e); err == nil {
		fmt.Fprintf(&b, "Sync: attempted %s applied %s conditions %+v\n", s.Status.LastAttemptedRevision, s.Status.LastAppliedRevision, s.Status.Conditions)
	}
	pods, _ := podsOf(ctx, e.Clientset, hcNamespace, agentSelector)
	for _, p := range pods {
		log, err := podLog(ctx, e.Clientset, hcNamespace, p.Name, "vm-agent", false)
		if err != nil {
			log = err.Error()
		}
		fmt.Fprintf(&b, "%s (vm-agent) log:\n%s\n", p.Name, tail(log, 4000))
	}
	fmt.Fprintf(&b, "serial log %s:\n%s\n", c.serialLog(), tail(logFrom(c.serialLog(), 0), 2000))
	return b.String()
}

// expandRootDisk raises the request of the DataVolume's PVC of c from its
// 64Mi to 128Mi while the VM runs (as a KubeVirt user expands a VM's
// disk): the resizer grows the volume (status.capacity 128Mi), the VM
// agent grows the running domain's disk (blockresize, on its next pass:
// its resync is 30 s) and the guest, not restarted, prints its vda at
// 128 MiB on the console.
func expandRootDisk(ctx context.Context, st *step, vc client.Client, c chainCase) {
	large := resource.MustParse("128Mi")
	before := fileSize(c.serialLog())
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: chainNS, Name: c.dataVolume}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"requests":{"storage":"`+large.String()+`"}}}}`))
	st.do("the DataVolume's PVC takes a request of "+large.String(), time.Minute, func() (bool, string) {
		err := vc.Patch(ctx, pvc, patch)
		return err == nil, fmt.Sprint(err)
	})
	st.do("the PVC's status.capacity grows to "+large.String(), 2*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, err.Error()
		}
		got := pvc.Status.Capacity[corev1.ResourceStorage]
		return got.Cmp(large) == 0, fmt.Sprintf("status.capacity %s conditions %+v", got.String(), pvc.Status.Conditions)
	})
	line := fmt.Sprintf("%s vda %d", guestimage.MarkerDisk, large.Value())
	st.do("the running guest sees its root disk at "+large.String(), 3*time.Minute, func() (bool, string) {
		log := logFrom(c.serialLog(), before)
		return strings.Contains(log, line), tail(log, 1500)
	})
}
