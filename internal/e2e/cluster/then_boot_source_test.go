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

	v1 "github.com/google/go-containerregistry/pkg/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/internal/testing/guestimage"
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

// TestNativeSSP is issue 20 on the real cluster, through the SSP the
// graph derives from the example's HyperConverged (native mode derives it
// on plain Kubernetes too) and converge-controller's SSP operator runs:
//
//   - boot source: a dataImportCronTemplate committed to the
//     HyperConverged in Git becomes, through the SSP, a DataImportCron in
//     kubevirt-os-images that polls a registry on the node address over
//     TLS (its CA in the template's certConfigMap) every 2 s; the import
//     of the test guest's containerDisk in a pod (the cdi-importer node
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
// Reverting the commit at the end removes the DataImportCron, and with it
// its DataSource and imports (CDI's cleanup under retentionPolicy None),
// while the SSP stays Available.
func TestNativeSSP(t *testing.T) {
	vt := startVMTest(t, 25*time.Minute)
	e, ctx, vc, repo, guestDir := vt.e, vt.ctx, vt.vc, vt.repo, vt.guestDir
	st := &step{t: t}
	st.do("the graph's SSP is Available with its roles: namespace "+osImagesNS+", the template validator registered", 3*time.Minute, func() (bool, string) {
		if avail, ok := sspAvailable(ctx, vc); !ok {
			return false, avail
		}
		if err := vc.Get(ctx, client.ObjectKey{Name: osImagesNS}, &corev1.Namespace{}); err != nil {
			return false, err.Error()
		}
		err := vc.Get(ctx, client.ObjectKey{Name: templatevalidator.ConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		return err == nil, fmt.Sprint(err)
	})
	for _, n := range []string{bootVMNS, templatesNS} {
		if err := vc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"converge-test": "native-ssp"}}}); err != nil {
			t.Fatal(err)
		}
	}

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

	// The boot source, as a user adds one to the HyperConverged, with the
	// common templates' namespace the test's (the Template API stands in
	// later; HCO's default, openshift, does not exist here).
	edit := bootSourceHC(ref)
	repo.Replace(t, "a boot source", hcFile, bootSourceAnchor, edit)
	requestReconcile(t, ctx, e, "a boot source")
	defer revertBootSource(t, e, vc, repo, edit)

	t.Run("boot source", func(t *testing.T) { testBootSource(t, ctx, vc, reg, digestA, imgB, tokA, tokB) })
	t.Run("template validator", func(t *testing.T) { testTemplateValidator(t, ctx, vc) })
}

// bootSourceAnchor is the example HyperConverged's line bootSourceHC's
// fields follow.
const bootSourceAnchor = "  enableCommonBootImageImport: false\n"

// bootSourceHC gives the HyperConverged (v1beta1) lines TestNativeSSP
// adds after bootSourceAnchor: commonTemplatesNamespace templatesNS and
// a dataImportCronTemplate polling ref every 2 s, keeping one import.
func bootSourceHC(ref string) string {
	return bootSourceAnchor + `  commonTemplatesNamespace: ` + templatesNS + `
  dataImportCronTemplates:
  - metadata:
      name: ` + bootCron + `
    spec:
      managedDataSource: ` + bootDS + `
      schedule: "@every 2s"
      garbageCollect: Outdated
      importsToKeep: 1
      retentionPolicy: None
      template:
        spec:
          source:
            registry:
              url: docker://` + ref + `
              certConfigMap: ` + bootCA + `
          storage:
            storageClassName: ` + storageClass + `
            resources:
              requests:
                storage: 64Mi
`
}

// sspAvailable gives the graph's SSP's Available condition and whether it
// is True.
func sspAvailable(ctx context.Context, vc client.Client) (string, bool) {
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("ssp.kubevirt.io/v1beta3")
	got.SetKind("SSP")
	if err := vc.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: sspName}, got); err != nil {
		return err.Error(), false
	}
	avail := condition(got, "Available")
	return "SSP Available " + avail + "; Degraded " + condition(got, "Degraded"), strings.HasPrefix(avail, "True")
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

// testBootSource is TestNativeSSP's boot source (see there): the cron
// committed polls reg, which holds imgA (digestA, kernel token tokA);
// imgB (tokB) is pushed under the same tag later.
func testBootSource(t *testing.T, ctx context.Context, vc client.Client, reg *guestimage.Registry, digestA v1.Hash, imgB v1.Image, tokA, tokB string) {
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
	ref := reg.Addr + "/" + bootRepo + ":" + bootTag
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

// revertBootSource deletes the test's VMs and the Template CRD, commits
// the HyperConverged back (edit replaced by bootSourceAnchor) and waits
// until the Sync is Ready on it, the SSP Available, and the
// DataImportCron, its DataSource and imports are gone; then deletes the
// CA ConfigMap and the test's namespaces and waits until they are gone.
// The Template CRD goes first: with it served, the SSP's common
// templates would go to HCO's default namespace, openshift, which does
// not exist here.
func revertBootSource(t *testing.T, e *cluster.Env, vc client.Client, repo *gitserver.Repo, edit string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_ = vc.DeleteAllOf(ctx, &kubevirtv1.VirtualMachine{}, client.InNamespace(bootVMNS))
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(crdtest.TemplateCRDName)
	if err := vc.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: deleting the Template CRD: %v", err)
	}
	st := &step{t: t, prefix: "cleanup "}
	st.do("the Template CRD is gone", 3*time.Minute, func() (bool, string) {
		err := vc.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy())
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	repo.Replace(t, "no boot source", hcFile, edit, bootSourceAnchor)
	requestReconcile(t, ctx, e, "no boot source")
	waitSyncReady(t, ctx, e)
	st.do("the SSP is Available; the DataImportCron, its DataSource and imports are gone", 3*time.Minute, func() (bool, string) {
		if avail, ok := sspAvailable(ctx, vc); !ok {
			return false, avail
		}
		var left []string
		if err := vc.Get(ctx, client.ObjectKey{Namespace: osImagesNS, Name: bootCron}, &cdiv1.DataImportCron{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("DataImportCron: %v", err))
		}
		if err := vc.Get(ctx, client.ObjectKey{Namespace: osImagesNS, Name: bootDS}, &cdiv1.DataSource{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("DataSource: %v", err))
		}
		dvs := &cdiv1.DataVolumeList{}
		if err := vc.List(ctx, dvs, client.InNamespace(osImagesNS)); err != nil {
			left = append(left, err.Error())
		}
		for _, dv := range dvs.Items {
			left = append(left, "DataVolume "+dv.Name)
		}
		pvcs := &corev1.PersistentVolumeClaimList{}
		if err := vc.List(ctx, pvcs, client.InNamespace(osImagesNS)); err != nil {
			left = append(left, err.Error())
		}
		for _, pvc := range pvcs.Items {
			left = append(left, "PVC "+pvc.Name)
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
	if err := vc.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: osImagesNS, Name: bootCA}}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: deleting ConfigMap %s: %v", bootCA, err)
	}
	for _, n := range []string{bootVMNS, templatesNS} {
		if err := vc.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: deleting namespace %s: %v", n, err)
		}
	}
	st.do("the test's namespaces are gone", 4*time.Minute, func() (bool, string) {
		var left []string
		for _, n := range []string{bootVMNS, templatesNS} {
			if err := vc.Get(ctx, client.ObjectKey{Name: n}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("namespace %s: %v", n, err))
			}
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
}
