package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/guestimage"
)

// The namespaces of TestGoldenImageClone: SSP's golden images namespace,
// one no grant opens, and the VM's.
const (
	goldenNS  = "kubevirt-os-images"
	privateNS = "clone-private-images"
	cloneVMNS = "clone-vms"
)

// TestGoldenImageClone is issues 20 and 21's golden image clone on the
// real cluster: the guest disk is imported over HTTP into a DataVolume in
// kubevirt-os-images (with SSP's os-images.kubevirt.io:view Role and
// RoleBinding, created by the test when SSP has not), a DataSource names
// it and becomes Ready; the user carol, who may edit VMs and DataVolumes
// in clone-vms only, creates a VM there whose dataVolumeTemplate has
// sourceRef to that DataSource: the VM validation webhook authorizes her
// (SSP's Role grants datavolumes/source to every authenticated user),
// virt-controller the VM's ServiceAccount, the DataVolume admission
// webhook stamps the clone token, the clone is copied on the node and
// the VM boots from it (the guest prints its user data's marker and its
// name on the serial console). The negative: a VM and a DataVolume of
// carol cloning from a namespace where she has no datavolumes/source are
// refused with CDI's message.
func TestGoldenImageClone(t *testing.T) {
	v := startVMTest(t, 20*time.Minute)
	e, ctx, guestDir, vc := v.e, v.ctx, v.guestDir, v.vc
	cfg := rest.CopyConfig(e.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "carol", Groups: []string{"system:authenticated"}}
	carol, err := client.New(cfg, client.Options{Scheme: vmScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	files := guestimage.ServeFiles(t, localcluster.NodeIP+":0", guestDir, guestimage.DiskImage)
	st := &step{t: t}

	// What the test creates goes at the end (the golden namespace only
	// when SSP had not made it).
	var created []client.Object
	create := func(o client.Object) {
		t.Helper()
		if err := vc.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, client.ObjectKeyFromObject(o), err)
		}
		created = append(created, o)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer ccancel()
		for i := len(created) - 1; i >= 0; i-- {
			_ = vc.Delete(cctx, created[i])
		}
		for _, n := range []string{cloneVMNS, privateNS, goldenNS} {
			eventually(t, 4*time.Minute, "cleanup: namespace "+n+" is gone or was not the test's", func() (bool, string) {
				ns := &corev1.Namespace{}
				err := vc.Get(cctx, client.ObjectKey{Name: n}, ns)
				return apierrors.IsNotFound(err) || (err == nil && ns.Labels["converge-test"] != "golden-clone"), fmt.Sprint(err)
			})
		}
	}()
	if err := vc.Get(ctx, client.ObjectKey{Name: goldenNS}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: goldenNS, Labels: map[string]string{"converge-test": "golden-clone"}}})
		// SSP's os-images.kubevirt.io:view (components/ssp/roles.cue)
		create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: goldenNS, Name: "os-images.kubevirt.io:view"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "persistentvolumeclaims/status", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"}},
			}})
		create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: goldenNS, Name: "os-images.kubevirt.io:view"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "os-images.kubevirt.io:view"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:authenticated"},
				{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:serviceaccounts"}}})
	} else if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{privateNS, cloneVMNS} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"converge-test": "golden-clone"}}})
	}
	create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: cloneVMNS, Name: "vm-edit"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"create", "get", "list", "delete"}},
			{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes"}, Verbs: []string{"create", "get", "list", "delete"}},
		}})
	create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: cloneVMNS, Name: "vm-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vm-edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "carol"}}})

	// The golden image: imported over HTTP, named by a DataSource.
	class, size := storageClass, resource.MustParse("64Mi")
	golden := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: goldenNS, Name: "converge-guest-golden"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: files.FileURL(guestimage.DiskImage)}},
			Storage: &cdiv1.StorageSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}}
	create(golden)
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: goldenNS, Name: "converge-guest"},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: goldenNS, Name: golden.Name}}}}
	create(ds)
	private := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: privateNS, Name: "converge-guest"},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: privateNS, Name: "secret-disk"}}}}
	create(private)
	st.do("the golden DataVolume imports over HTTP (Succeeded)", 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKeyFromObject(golden), golden); err != nil {
			return false, err.Error()
		}
		if golden.Status.Phase == cdiv1.Failed {
			st.stop("DataVolume %s Failed: %+v", golden.Name, golden.Status.Conditions)
		}
		return golden.Status.Phase == cdiv1.Succeeded, fmt.Sprintf("phase %s conditions %+v", golden.Status.Phase, golden.Status.Conditions)
	})
	st.do("the DataSource "+goldenNS+"/"+ds.Name+" is Ready", 2*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
			return false, err.Error()
		}
		for _, c := range ds.Status.Conditions {
			if c.Type == cdiv1.DataSourceReady {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("%+v", ds.Status.Conditions)
			}
		}
		return false, fmt.Sprintf("%+v", ds.Status.Conditions)
	})

	// The negative: carol may not clone from privateNS.
	refused := "User carol has insufficient permissions in clone source namespace " + privateNS
	err = carol.Create(ctx, goldenCloneVM(cloneVMNS, "private", privateNS, "", ""))
	st.do("carol's VM cloning from "+privateNS+" is refused with CDI's message", time.Second, func() (bool, string) {
		return err != nil && strings.Contains(err.Error(), "spec.dataVolumeTemplates[0]: "+refused), fmt.Sprint(err)
	})
	privateDV := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: cloneVMNS, Name: "private"},
		Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Namespace: &private.Namespace, Name: private.Name},
			Storage: &cdiv1.StorageSpec{StorageClassName: &class}}}
	err = carol.Create(ctx, privateDV)
	st.do("carol's DataVolume cloning from "+privateNS+" is refused with CDI's message", time.Second, func() (bool, string) {
		return err != nil && strings.Contains(err.Error(), `admission webhook "datavolume-mutate.cdi.kubevirt.io" denied the request:  `+refused), fmt.Sprint(err)
	})

	// The VM from the golden image.
	const vmName, dvName = "golden-clone", "golden-clone-root"
	marker := "GOLDEN-CLONE-" + randomHex(t)[:12]
	serial := filepath.Join(agentStateDir, "serial", cloneVMNS+"_"+vmName+"-serial.log")
	logStart := fileSize(serial)
	vm := goldenCloneVM(cloneVMNS, vmName, goldenNS, ds.Name, marker)
	if err := carol.Create(ctx, vm); err != nil {
		t.Fatalf("carol's VM cloning the golden image: %v", err)
	}
	created = append(created, vm)
	dv := &cdiv1.DataVolume{}
	start := time.Now()
	st.do("the clone of the golden image Succeeds in "+cloneVMNS, 5*time.Minute, func() (bool, string) {
		if err := vc.Get(ctx, client.ObjectKey{Namespace: cloneVMNS, Name: dvName}, dv); err != nil {
			return false, err.Error()
		}
		if dv.Status.Phase == cdiv1.Failed {
			st.stop("DataVolume %s Failed: %+v", dvName, dv.Status.Conditions)
		}
		return dv.Status.Phase == cdiv1.Succeeded, fmt.Sprintf("phase %s conditions %+v", dv.Status.Phase, dv.Status.Conditions)
	})
	t.Logf("clone Succeeded %v after the VM was created", time.Since(start).Round(time.Millisecond))
	st.do("the DataVolume carries the webhook's and the extended clone token", time.Second, func() (bool, string) {
		return dv.Annotations[tokenapi.AnnCloneToken] != "" && dv.Annotations[tokenapi.AnnExtendedCloneToken] != "", fmt.Sprintf("annotations %v", dv.Annotations)
	})
	st.do("the guest boots from the clone: its user data's marker and its name on the serial console", 5*time.Minute, func() (bool, string) {
		log := logFrom(serial, logStart)
		return strings.Contains(log, markerLine(marker)) && strings.Contains(log, guestimage.MarkerOK+" "+vmName+" "), serial + ": " + tail(log, 1500)
	})
	t.Logf("guest booted %v after the VM was created", time.Since(start).Round(time.Millisecond))
}

// goldenCloneVM is a VM ns/name whose root disk is a dataVolumeTemplate
// cloning DataSource dsNS/ds (converge-guest when ds is empty), no NIC,
// and a cloudInitNoCloud disk whose user data holds marker.
func goldenCloneVM(ns, name, dsNS, ds, marker string) *kubevirtv1.VirtualMachine {
	if ds == "" {
		ds = "converge-guest"
	}
	class, always, no := storageClass, kubevirtv1.RunStrategyAlways, false
	grace := int64(2)
	mem := resource.MustParse("128Mi")
	root := name + "-root"
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &always,
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: root},
				Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Namespace: &dsNS, Name: ds},
					Storage: &cdiv1.StorageSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				TerminationGracePeriodSeconds: &grace,
				Domain: kubevirtv1.DomainSpec{
					CPU:    &kubevirtv1.CPU{Cores: 1},
					Memory: &kubevirtv1.Memory{Guest: &mem},
					Devices: kubevirtv1.Devices{AutoattachPodInterface: &no, Disks: []kubevirtv1.Disk{
						{Name: "rootdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
						{Name: "cloudinitdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
					}},
				},
				Volumes: []kubevirtv1.Volume{
					{Name: "rootdisk", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: root}}},
					{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: userData(marker)}}},
				},
			}},
		},
	}
}
