package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/ssp/templatevalidator"
)

// What TestNativeSSP creates: the SSP (HCO's name for it), the golden
// images namespace its roles make, the boot source's names, and the
// test's namespaces.
const (
	sspName     = "ssp-kubevirt-hyperconverged"
	osImagesNS  = "kubevirt-os-images" // components/ssp GoldenImagesNamespace
	bootCron    = "boot-source-guest-cron"
	bootDS      = "boot-source-guest"
	bootRepo    = "containerdisks/converge-guest"
	bootTag     = "latest"
	bootCA      = "boot-source-registry-ca"
	bootVMNS    = "boot-source-vms"
	templatesNS = "boot-source-templates"
)

// TestNativeSSP is issue 20 on the real cluster, through a native SSP
// created as ssp-operator's users create one (the graph derives none on
// plain Kubernetes, as HCO: the SSP is OpenShift's), whose roles
// converge-controller's SSP operator runs:
//
//   - boot source: a DataImportCron from the SSP's
//     dataImportCronTemplates (the SSP role makes it in
//     kubevirt-os-images) polls a registry on the node address over TLS
//     (its CA in the template's certConfigMap) every 2 s; the import of
//     the test guest's containerDisk in a pod (the cdi-importer node
//     agent) makes the DataSource Ready on it; an image of another digest
//     pushed under the same tag is imported again and the DataSource
//     moves to it, the first import is collected (importsToKeep 1), and a
//     VM whose dataVolumeTemplate has sourceRef to the DataSource boots
//     the new image (its kernel command line, which differs between the
//     two images, on the serial console);
//   - template validator: with a CRD standing in for OpenShift's
//     Template API, a VM created from a Template whose validations rule
//     it breaks is refused with SSP's message, one that keeps it is
//     admitted.
//
// Deleting the SSP at the end removes what its roles made and the
// template validator; converge-controller restarts without the role
// (operand.ErrRoleGone), and the test waits for it and the Sync.
func TestNativeSSP(t *testing.T) {
	vt := startVMTest(t, 25*time.Minute)
	e, ctx, vc, guestDir := vt.e, vt.ctx, vt.vc, vt.guestDir
	if err := vc.Get(ctx, client.ObjectKey{Name: osImagesNS}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s exists before the SSP (%v): the SSP's prune would delete it", osImagesNS, err)
	}
	for _, n := range []string{bootVMNS, templatesNS} {
		if err := vc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"converge-test": "native-ssp"}}}); err != nil {
			t.Fatal(err)
		}
	}
	cr := nativeSSP()
	restarts := controllerRestarts(t, ctx, e)
	if err := vc.Create(ctx, cr); err != nil {
		t.Fatalf("creating the SSP: %v", err)
	}
	defer removeNativeSSP(t, e, vc, cr, restarts)

	st := &step{t: t}
	st.do("the SSP's roles are applied: namespace "+osImagesNS+", the template validator registered", 3*time.Minute, func() (bool, string) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(cr.GroupVersionKind())
		if err := vc.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return false, err.Error()
		}
		avail := condition(got, "Available")
		if !strings.HasPrefix(avail, "True") {
			return false, "SSP Available " + avail + "; Degraded " + condition(got, "Degraded")
		}
		if err := vc.Get(ctx, client.ObjectKey{Name: osImagesNS}, &corev1.Namespace{}); err != nil {
			return false, err.Error()
		}
		err := vc.Get(ctx, client.ObjectKey{Name: templatevalidator.ConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		return err == nil, fmt.Sprint(err)
	})

	t.Run("boot source", func(t *testing.T) { testBootSource(t, ctx, e, vc, cr, guestDir) })
	t.Run("template validator", func(t *testing.T) { testTemplateValidator(t, ctx, vc) })
}

// nativeSSP is the SSP, marked native, with no dataImportCronTemplates
// yet and its common templates' namespace templatesNS.
func nativeSSP() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ssp.kubevirt.io/v1beta3", "kind": "SSP",
		"metadata": map[string]any{"name": sspName, "namespace": hcNamespace,
			"annotations": map[string]any{operand.NativeAnnotation: operand.Native}},
		"spec": map[string]any{"templateValidator": map[string]any{"replicas": int64(1)},
			"commonTemplates": map[string]any{"namespace": templatesNS}},
	}}
}

// condition gives u's condition typ as "Status Reason: message", "" when
// it has none.
func condition(u *unstructured.Unstructured, typ string) string {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range raw {
		if m, ok := x.(map[string]any); ok && m["type"] == typ {
			return fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return ""
}

// testBootSource is TestNativeSSP's boot source (see there).
func testBootSource(t *testing.T, ctx context.Context, e *cluster.Env, vc client.Client, cr *unstructured.Unstructured, guestDir string) {
	// Two images of the guest disk under one tag: the same disk, the
	// kernel command line's "quiet" replaced by a token of each, so the
	// kernel prints its command line, token included, at boot.
	tokA, tokB := "a"+randomHex(t)[:4], "b"+randomHex(t)[:4]
	imgA, imgB := guestVariant(t, guestDir, tokA), guestVariant(t, guestDir, tokB)
	reg := guestimage.StartTLSRegistry(t, localcluster.NodeIP+":0")
	ref, digestA, err := reg.Push(bootRepo, bootTag, imgA)
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: osImagesNS, Name: bootCA},
		Data: map[string]string{"ca.crt": string(reg.CAPEM)}}); err != nil {
		t.Fatal(err)
	}

	// The boot source, as a user adds one to the SSP.
	cron := map[string]any{"metadata": map[string]any{"name": bootCron},
		"spec": map[string]any{"managedDataSource": bootDS, "schedule": "@every 2s",
			"garbageCollect": "Outdated", "importsToKeep": int64(1), "retentionPolicy": "None",
			"template": map[string]any{"spec": map[string]any{
				"source": map[string]any{"registry": map[string]any{"url": "docker://" + ref, "certConfigMap": bootCA}},
				"storage": map[string]any{"storageClassName": storageClass,
					"resources": map[string]any{"requests": map[string]any{"storage": "64Mi"}}}}}}}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"commonTemplates": map[string]any{"dataImportCronTemplates": []any{cron}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.Patch(ctx, cr, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("adding the dataImportCronTemplate to the SSP: %v", err)
	}
	st := &step{t: t}
	start := time.Now()
	ds := &cdiv1.DataSource{}
	dsKey := client.ObjectKey{Namespace: osImagesNS, Name: bootDS}
	st.do("the SSP's DataImportCron imports the image: DataSource "+osImagesNS+"/"+bootDS+" Ready on "+importName(digestA), 5*time.Minute,
		dataSourceOn(ctx, st, vc, dsKey, ds, digestA))
	imported := time.Since(start)
	dv := &cdiv1.DataVolume{}
	if err := vc.Get(ctx, client.ObjectKey{Namespace: osImagesNS, Name: importName(digestA)}, dv); err != nil {
		t.Fatal(err)
	}
	if want := "docker://" + strings.TrimSuffix(ref, ":"+bootTag) + "@" + digestA.String(); dv.Spec.Source == nil || dv.Spec.Source.Registry == nil ||
		dv.Spec.Source.Registry.URL == nil || *dv.Spec.Source.Registry.URL != want {
		t.Errorf("the import's source %+v, want registry URL %s pinned to the digest", dv.Spec.Source, want)
	}

	// A new digest under the same tag.
	if _, digestB, err := reg.Push(bootRepo, bootTag, imgB); err != nil {
		t.Fatal(err)
	} else {
		start = time.Now()
		st.do("the new digest is imported and the DataSource moves to "+importName(digestB), 5*time.Minute,
			dataSourceOn(ctx, st, vc, dsKey, ds, digestB))
		moved := time.Since(start)
		st.do("the first import ("+importName(digestA)+") is collected: its DataVolume and PVC are gone", 3*time.Minute, func() (bool, string) {
			key := client.ObjectKey{Namespace: osImagesNS, Name: importName(digestA)}
			errDV, errPVC := vc.Get(ctx, key, &cdiv1.DataVolume{}), vc.Get(ctx, key, &corev1.PersistentVolumeClaim{})
			return apierrors.IsNotFound(errDV) && apierrors.IsNotFound(errPVC), fmt.Sprintf("DataVolume: %v; PVC: %v", errDV, errPVC)
		})
		collected := time.Since(start)
		dic := &cdiv1.DataImportCron{}
		if err := vc.Get(ctx, client.ObjectKey{Namespace: osImagesNS, Name: bootCron}, dic); err != nil {
			t.Fatal(err)
		}
		if n := len(dic.Status.CurrentImports); n != 1 || dic.Status.CurrentImports[0].Digest != digestB.String() {
			t.Errorf("DataImportCron currentImports %+v, want the one of %s", dic.Status.CurrentImports, digestB)
		}
		t.Logf("boot source: first import to DataSource Ready %s; digest pushed to DataSource moved %s, old import collected %s",
			imported.Round(time.Millisecond), moved.Round(time.Millisecond), collected.Round(time.Millisecond))
	}

	// A VM from the DataSource boots the new image.
	const vmName = "boot-source-vm"
	marker := "BOOT-SOURCE-" + randomHex(t)[:12]
	serial := filepath.Join(agentStateDir, "serial", bootVMNS+"_"+vmName+"-serial.log")
	logStart := fileSize(serial)
	vm := goldenCloneVM(bootVMNS, vmName, osImagesNS, bootDS, marker)
	start = time.Now()
	if err := vc.Create(ctx, vm); err != nil {
		t.Fatalf("the VM cloning the boot source: %v", err)
	}
	cmdline := func(tok string) string { return "panic=-1 " + tok + " converge.dhcp=1" }
	st.do("the VM boots the new image: its kernel command line ("+tokB+"), user data marker and name on the serial console", 6*time.Minute, func() (bool, string) {
		log := logFrom(serial, logStart)
		if strings.Contains(log, cmdline(tokA)) {
			st.stop("the guest booted the first image (%s): the DataSource did not move; %s", tokA, tail(log, 1500))
		}
		return strings.Contains(log, cmdline(tokB)) && strings.Contains(log, markerLine(marker)) && strings.Contains(log, guestimage.MarkerOK+" "+vmName+" "),
			serial + ": " + tail(log, 1500)
	})
	t.Logf("boot source: VM created to guest booted %s", time.Since(start).Round(time.Millisecond))
}

// importName is the name of a DataImportCron's import of digest, CDI's
// <managedDataSource>-<first 12 hex digits of the digest>.
func importName(digest v1.Hash) string { return bootDS + "-" + digest.Hex[:12] }

// dataSourceOn reports whether the DataSource key (read into ds) is Ready
// and points at the import of digest.
func dataSourceOn(ctx context.Context, st *step, vc client.Client, key client.ObjectKey, ds *cdiv1.DataSource, digest v1.Hash) func() (bool, string) {
	return func() (bool, string) {
		dv := &cdiv1.DataVolume{}
		if err := vc.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: importName(digest)}, dv); err == nil && dv.Status.Phase == cdiv1.Failed {
			st.stop("the import %s Failed: %+v", dv.Name, dv.Status.Conditions)
		}
		if err := vc.Get(ctx, key, ds); err != nil {
			return false, fmt.Sprintf("DataSource: %v; import %s phase %s", err, dv.Name, dv.Status.Phase)
		}
		ready := false
		for _, c := range ds.Status.Conditions {
			ready = ready || (c.Type == cdiv1.DataSourceReady && c.Status == corev1.ConditionTrue)
		}
		pvc := ds.Spec.Source.PVC
		return ready && pvc != nil && pvc.Namespace == key.Namespace && pvc.Name == importName(digest),
			fmt.Sprintf("DataSource source %+v conditions %+v; import %s phase %s", pvc, ds.Status.Conditions, importName(digest), dv.Status.Phase)
	}
}

// guestVariant gives the containerDisk of the guest's raw disk whose
// kernel command line (SYSLINUX's APPEND, hack/guest syslinux.cfg) has
// token, five characters, in place of "quiet".
func guestVariant(t *testing.T, guestDir, token string) v1.Image {
	t.Helper()
	const from = "panic=-1 quiet converge.dhcp=1"
	disk, err := os.ReadFile(filepath.Join(guestDir, guestimage.DiskImage))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(disk, []byte(from)); n != 1 || len(token) != len("quiet") {
		t.Fatalf("%s holds %q %d times (want once); token %q (want 5 characters)", guestimage.DiskImage, from, n, token)
	}
	path := filepath.Join(t.TempDir(), guestimage.DiskImage)
	if err := os.WriteFile(path, bytes.Replace(disk, []byte(from), []byte("panic=-1 "+token+" converge.dhcp=1"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := guestimage.ContainerDisk(path)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testTemplateValidator is TestNativeSSP's template validator (see there).
func testTemplateValidator(t *testing.T, ctx context.Context, vc client.Client) {
	crdtest.InstallTemplateAPI(t, vc)
	const rule = `[{"name":"minimal-required-memory","path":"jsonpath::.spec.domain.resources.requests.memory","rule":"integer","message":"This VM requires more memory.","min":2147483648}]`
	tmpl := &unstructured.Unstructured{Object: map[string]any{"objects": []any{}}}
	tmpl.SetGroupVersionKind(templatevalidator.TemplateGVK)
	tmpl.SetNamespace(templatesNS)
	tmpl.SetName("guest-small")
	tmpl.SetAnnotations(map[string]string{"validations": rule})
	if err := vc.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("admission webhook %q denied the request: This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]",
		templatevalidator.VirtualMachineWebhookName)
	st := &step{t: t}
	// converge-controller reads Templates through its REST mapper, which
	// learns the new API within its refresh; until then a templated VM is
	// admitted, as where no Template API is served: probe with dry runs.
	st.do("the template validator reads the Template (a dry run refused)", 2*time.Minute, func() (bool, string) {
		err := vc.Create(ctx, templatedVM("probe", "1Gi"), client.DryRunAll)
		return err != nil && err.Error() == want, fmt.Sprintf("%v\nwant %s", err, want)
	})
	err := vc.Create(ctx, templatedVM("too-small", "1Gi"))
	st.do("a VM breaking the Template's rule (1Gi, at least 2Gi) is refused with SSP's message", time.Second, func() (bool, string) {
		return err != nil && err.Error() == want, fmt.Sprintf("%v\nwant %s", err, want)
	})
	if err := vc.Create(ctx, templatedVM("big-enough", "2Gi")); err != nil {
		t.Errorf("VM big-enough (2Gi) refused: %v", err)
	}
}

// templatedVM is a Halted VM in bootVMNS created from Template
// templatesNS/guest-small (SSP's labels), requesting memory.
func templatedVM(name, memory string) *kubevirtv1.VirtualMachine {
	halted := kubevirtv1.RunStrategyHalted
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: bootVMNS, Name: name,
			Labels: map[string]string{templatevalidator.TemplateNameKey: "guest-small", templatevalidator.TemplateNamespaceKey: templatesNS}},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{
					Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}},
					Devices:   kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "cloudinitdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}},
				},
				Volumes: []kubevirtv1.Volume{{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: userData("template")}}}},
			}}},
	}
}

// controllerRestarts gives the converge-controller container's restart
// count.
func controllerRestarts(t *testing.T, ctx context.Context, e *cluster.Env) int32 {
	t.Helper()
	p, err := controllerPod(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "manager" {
			return cs.RestartCount
		}
	}
	t.Fatalf("no manager container: %s", describePod(p))
	return 0
}

// removeNativeSSP deletes the test's VMs and the SSP and waits until its
// roles are gone (the golden images namespace, the template validator's
// configuration), converge-controller has restarted without the role and
// is ready, and the Sync is Ready again; then deletes the Template CRD
// and the test's namespaces and waits until they are gone.
func removeNativeSSP(t *testing.T, e *cluster.Env, vc client.Client, cr *unstructured.Unstructured, restarts int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_ = vc.DeleteAllOf(ctx, &kubevirtv1.VirtualMachine{}, client.InNamespace(bootVMNS))
	if err := vc.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: deleting the SSP: %v", err)
	}
	st := &step{t: t, prefix: "cleanup "}
	st.do("the SSP and its roles are gone", 5*time.Minute, func() (bool, string) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(cr.GroupVersionKind())
		errSSP := vc.Get(ctx, client.ObjectKeyFromObject(cr), got)
		errNS := vc.Get(ctx, client.ObjectKey{Name: osImagesNS}, &corev1.Namespace{})
		errVWC := vc.Get(ctx, client.ObjectKey{Name: templatevalidator.ConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		return apierrors.IsNotFound(errSSP) && apierrors.IsNotFound(errNS) && apierrors.IsNotFound(errVWC),
			fmt.Sprintf("SSP: %v (finalizers %v); namespace %s: %v; %s: %v", errSSP, got.GetFinalizers(), osImagesNS, errNS, templatevalidator.ConfigurationName, errVWC)
	})
	st.do("converge-controller restarted without the template validator and is ready", 3*time.Minute, func() (bool, string) {
		p, err := controllerPod(ctx, e)
		if err != nil {
			return false, err.Error()
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "manager" && cs.RestartCount > restarts && podReady(p) {
				return true, ""
			}
		}
		return false, describePod(p)
	})
	waitSyncReady(t, ctx, e)
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(crdtest.TemplateCRDName)
	if err := vc.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: deleting the Template CRD: %v", err)
	}
	for _, n := range []string{bootVMNS, templatesNS} {
		if err := vc.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: deleting namespace %s: %v", n, err)
		}
	}
	st.do("the test's namespaces and the Template CRD are gone", 4*time.Minute, func() (bool, string) {
		var left []string
		for _, n := range []string{bootVMNS, templatesNS} {
			if err := vc.Get(ctx, client.ObjectKey{Name: n}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("namespace %s: %v", n, err))
			}
		}
		if err := vc.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy()); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("CRD: %v", err))
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
}
