package vmadmission_test

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// rbac answers SubjectAccessReviews as RBAC would for one grant: allowed
// when the user is allowed and the attributes are create
// datavolumes/source in namespace images; DataSources are those listed.
type rbac struct {
	allowed     string
	dataSources map[string]*cdiv1.DataSource
}

func (r rbac) CreateSar(sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	a := sar.Spec.ResourceAttributes
	out := sar.DeepCopy()
	out.Status.Allowed = sar.Spec.User == r.allowed && a.Namespace == "images" && a.Verb == "create" && a.Resource == "datavolumes" && a.Subresource == "source"
	return out, nil
}

func (r rbac) GetNamespace(name string) (*corev1.Namespace, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

func (r rbac) GetDataSource(ns, name string) (*cdiv1.DataSource, error) {
	if ds, ok := r.dataSources[ns+"/"+name]; ok {
		return ds, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "cdi.kubevirt.io", Resource: "datasources"}, name)
}

// TestCheckDataVolumeClones: the requester of a VM whose
// dataVolumeTemplate clones from another namespace needs create on
// datavolumes/source there (KubeVirt's authorizeVirtualMachineSpec over
// CDI's AuthorizeUser); a refusal carries CDI's message on the template.
func TestCheckDataVolumeClones(t *testing.T) {
	images := "images"
	proxy := rbac{allowed: "alice", dataSources: map[string]*cdiv1.DataSource{
		"images/fedora": {Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "images", Name: "fedora-1"}}}},
	}}
	vm := func(spec cdiv1.DataVolumeSpec) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"},
			Spec: kubevirtv1.VirtualMachineSpec{DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: spec}}}}
	}
	fromImages := cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Namespace: &images, Name: "fedora"}}
	for _, tc := range []struct {
		name, user string
		spec       cdiv1.DataVolumeSpec
		want       string // the error; "" none
		wantErr    bool
	}{
		{"DataSource of another namespace, allowed user", "alice", fromImages, "", false},
		{"DataSource of another namespace, other user", "bob", fromImages, "spec.dataVolumeTemplates[0]: User bob has insufficient permissions in clone source namespace images", false},
		{"PVC of another namespace, other user", "bob", cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "images", Name: "x"}}},
			"spec.dataVolumeTemplates[0]: User bob has insufficient permissions in clone source namespace images", false},
		{"PVC of its namespace", "bob", cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Name: "x"}}}, "", false},
		{"not a clone", "bob", cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}}, "", false},
		{"missing DataSource of its namespace waits", "bob", cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "later"}}, "", false},
		{"missing DataSource of another namespace", "alice", cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Namespace: &images, Name: "later"}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, err := vmadmission.CheckDataVolumeClones(vm(tc.spec), proxy, authenticationv1.UserInfo{Username: tc.user})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			var got string
			if len(errs) > 0 {
				got = errs.Error()
			}
			if got != tc.want {
				t.Errorf("CheckDataVolumeClones = %q, want %q", got, tc.want)
			}
		})
	}
}
