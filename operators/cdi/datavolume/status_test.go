package datavolume

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/api/v1alpha1"
)

func TestControllerStatus(t *testing.T) {
	pvc := func(phase corev1.PersistentVolumeClaimPhase, node string) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "dv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		if node != "" {
			p.Annotations = map[string]string{dvapi.AnnSelectedNode: node}
		}
		return p
	}
	cases := []struct {
		name      string
		phase     cdiv1.DataVolumePhase
		pvc       *corev1.PersistentVolumeClaim
		wffc      bool
		upload    bool
		wantPhase cdiv1.DataVolumePhase
		wantBound corev1.ConditionStatus
		boundWhy  string
	}{
		{"no PVC", "", nil, false, false, cdiv1.Pending, corev1.ConditionFalse, dvapi.ReasonNotFound},
		{"immediate pending", "", pvc(corev1.ClaimPending, ""), false, false, cdiv1.Pending, corev1.ConditionFalse, dvapi.ReasonPending},
		{"wffc no node", cdiv1.Pending, pvc(corev1.ClaimPending, ""), true, false, cdiv1.WaitForFirstConsumer, corev1.ConditionFalse, dvapi.ReasonPending},
		{"wffc node chosen", cdiv1.WaitForFirstConsumer, pvc(corev1.ClaimPending, "n1"), true, false, cdiv1.ImportScheduled, corev1.ConditionFalse, dvapi.ReasonPending},
		{"bound", cdiv1.ImportScheduled, pvc(corev1.ClaimBound, "n1"), true, false, cdiv1.ImportScheduled, corev1.ConditionTrue, dvapi.ReasonBound},
		{"agent's phase kept", cdiv1.ImportInProgress, pvc(corev1.ClaimBound, "n1"), true, false, cdiv1.ImportInProgress, corev1.ConditionTrue, dvapi.ReasonBound},
		{"succeeded kept", cdiv1.Succeeded, pvc(corev1.ClaimBound, ""), false, false, cdiv1.Succeeded, corev1.ConditionTrue, dvapi.ReasonBound},
		{"lost", cdiv1.ImportScheduled, pvc(corev1.ClaimLost, ""), false, false, cdiv1.ImportScheduled, corev1.ConditionFalse, dvapi.ReasonClaimLost},
		{"upload no PVC", "", nil, false, true, cdiv1.Pending, corev1.ConditionFalse, dvapi.ReasonNotFound},
		{"upload wffc no node", cdiv1.Pending, pvc(corev1.ClaimPending, ""), true, true, cdiv1.WaitForFirstConsumer, corev1.ConditionFalse, dvapi.ReasonPending},
		{"upload wffc node chosen", cdiv1.WaitForFirstConsumer, pvc(corev1.ClaimPending, "n1"), true, true, cdiv1.UploadScheduled, corev1.ConditionFalse, dvapi.ReasonPending},
		{"upload immediate pending", "", pvc(corev1.ClaimPending, ""), false, true, cdiv1.Pending, corev1.ConditionFalse, dvapi.ReasonPending},
		{"upload bound", cdiv1.UploadScheduled, pvc(corev1.ClaimBound, "n1"), true, true, cdiv1.UploadScheduled, corev1.ConditionTrue, dvapi.ReasonBound},
		{"upload ready kept (agent's)", cdiv1.UploadReady, pvc(corev1.ClaimBound, "n1"), true, true, cdiv1.UploadReady, corev1.ConditionTrue, dvapi.ReasonBound},
		{"upload succeeded kept", cdiv1.Succeeded, pvc(corev1.ClaimBound, "n1"), true, true, cdiv1.Succeeded, corev1.ConditionTrue, dvapi.ReasonBound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dv := &cdiv1.DataVolume{Status: cdiv1.DataVolumeStatus{Phase: tc.phase}}
			if tc.upload {
				dv.Spec.Source = &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}
			}
			if dvapi.Owned(tc.phase) {
				dv.Status.Conditions = dvapi.SetCondition(nil, cdiv1.DataVolumeRunning, corev1.ConditionTrue, "", "agent")
			}
			st := ControllerStatus(dv, tc.pvc, tc.wffc)
			if st.Phase != tc.wantPhase {
				t.Errorf("phase %q, want %q", st.Phase, tc.wantPhase)
			}
			b := dvapi.FindCondition(st.Conditions, cdiv1.DataVolumeBound)
			if b == nil || b.Status != tc.wantBound || b.Reason != tc.boundWhy {
				t.Errorf("Bound %+v, want %s/%s", b, tc.wantBound, tc.boundWhy)
			}
			r := dvapi.FindCondition(st.Conditions, cdiv1.DataVolumeRunning)
			if dvapi.Owned(tc.phase) {
				if r == nil || r.Status != corev1.ConditionTrue {
					t.Errorf("the agent's Running condition was changed: %+v", r)
				}
			} else if r == nil || r.Status != corev1.ConditionFalse || dvapi.FindCondition(st.Conditions, cdiv1.DataVolumeReady) == nil {
				t.Errorf("want Running=False and a Ready condition, got %+v", st.Conditions)
			}
			if dv.Status.Phase != tc.phase {
				t.Errorf("the input DataVolume was modified")
			}
		})
	}
}

func TestPickNode(t *testing.T) {
	n := func(name string, label, ready, cordoned bool) corev1.Node {
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if label {
			node.Labels[v1alpha1.ImporterNodeLabel] = "true"
		}
		node.Spec.Unschedulable = cordoned
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
		return node
	}
	cases := []struct {
		name   string
		nodes  []corev1.Node
		placed map[string]int
		want   string
	}{
		{"none", nil, nil, ""},
		{"unlabelled", []corev1.Node{n("a", false, true, false)}, nil, ""},
		{"not ready", []corev1.Node{n("a", true, false, false)}, nil, ""},
		{"cordoned", []corev1.Node{n("a", true, true, true)}, nil, ""},
		{"by name", []corev1.Node{n("b", true, true, false), n("a", true, true, false)}, nil, "a"},
		{"least placed", []corev1.Node{n("b", true, true, false), n("a", true, true, false)}, map[string]int{"a": 2, "b": 1}, "b"},
	}
	for _, tc := range cases {
		if got := PickNode(tc.nodes, tc.placed); got != tc.want {
			t.Errorf("%s: PickNode = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNewPVC(t *testing.T) {
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
	sc := "hostpath"
	base := func() *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n", UID: "u1", Labels: map[string]string{"app": "x"}}}
	}
	t.Run("http storage defaults", func(t *testing.T) {
		dv := base()
		dv.Spec.Source = &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://h/i.qcow2", CertConfigMap: "ca"}}
		dv.Spec.Storage = &cdiv1.StorageSpec{StorageClassName: &sc, Resources: size}
		p, err := NewPVC(dv, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != "d" || p.Namespace != "n" || p.Labels["app"] != "x" || !metav1.IsControlledBy(p, dv) {
			t.Errorf("metadata %+v", p.ObjectMeta)
		}
		want := map[string]string{dvapi.AnnSource: dvapi.SourceHTTP, dvapi.AnnEndpoint: "http://h/i.qcow2", dvapi.AnnCertConfigMap: "ca", dvapi.AnnContentType: "kubevirt", dvapi.AnnCreatedForDataVolume: "u1"}
		for k, v := range want {
			if p.Annotations[k] != v {
				t.Errorf("annotation %s = %q, want %q", k, p.Annotations[k], v)
			}
		}
		if len(p.Spec.AccessModes) != 1 || p.Spec.AccessModes[0] != corev1.ReadWriteOnce || *p.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || *p.Spec.StorageClassName != sc {
			t.Errorf("spec %+v: want ReadWriteOnce, Filesystem, class %s", p.Spec, sc)
		}
	})
	t.Run("blank pvc kept", func(t *testing.T) {
		dv := base()
		block := corev1.PersistentVolumeBlock
		dv.Spec.Source = &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}
		dv.Spec.PVC = &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeMode: &block, Resources: size}
		p, err := NewPVC(dv, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotations[dvapi.AnnSource] != dvapi.SourceNone || p.Spec.AccessModes[0] != corev1.ReadWriteMany || *p.Spec.VolumeMode != block {
			t.Errorf("got %v %+v", p.Annotations, p.Spec)
		}
	})
	t.Run("registry", func(t *testing.T) {
		dv := base()
		u, secret, ca := "docker://registry:5000/kubevirt/alpine:devel", "creds", "registry-ca"
		dv.Spec.Source = &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &u, SecretRef: &secret, CertConfigMap: &ca}}
		dv.Spec.Storage = &cdiv1.StorageSpec{StorageClassName: &sc, Resources: size}
		p, err := NewPVC(dv, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{dvapi.AnnSource: dvapi.SourceRegistry, dvapi.AnnEndpoint: u, dvapi.AnnSecret: secret, dvapi.AnnCertConfigMap: ca,
			dvapi.AnnRegistryImportMethod: "pod", dvapi.AnnContentType: "kubevirt"}
		for k, v := range want {
			if p.Annotations[k] != v {
				t.Errorf("annotation %s = %q, want %q", k, p.Annotations[k], v)
			}
		}
	})
	t.Run("upload", func(t *testing.T) {
		dv := base()
		dv.Spec.Source = &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}
		dv.Spec.Storage = &cdiv1.StorageSpec{StorageClassName: &sc, Resources: size}
		p, err := NewPVC(dv, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := p.Annotations[dvapi.AnnUploadRequest]; !ok || v != "" || p.Annotations[dvapi.AnnSource] != dvapi.SourceUpload || p.Annotations[dvapi.AnnEndpoint] != "" {
			t.Errorf("annotations %v: want %s=\"\", %s=%s and no endpoint", p.Annotations, dvapi.AnnUploadRequest, dvapi.AnnSource, dvapi.SourceUpload)
		}
		if !dvapi.IsUpload(dv) {
			t.Errorf("IsUpload = false for spec.source.upload")
		}
	})
	errs := []struct {
		name, want string
		mut        func(*cdiv1.DataVolume)
	}{
		{"no source", "expected exactly one of spec.source.http, spec.source.registry, spec.source.pvc, spec.source.blank, spec.source.upload or spec.sourceRef", func(dv *cdiv1.DataVolume) { dv.Spec.Storage = &cdiv1.StorageSpec{Resources: size} }},
		{"s3", "spec.source.s3: not supported by converge", func(dv *cdiv1.DataVolume) {
			dv.Spec.Source = &cdiv1.DataVolumeSource{S3: &cdiv1.DataVolumeSourceS3{URL: "s3://b/k"}}
			dv.Spec.Storage = &cdiv1.StorageSpec{Resources: size}
		}},
		{"registry without scheme", `spec.source.registry.url: "quay.io/x": expected docker://`, func(dv *cdiv1.DataVolume) {
			u := "quay.io/x"
			dv.Spec.Source = &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &u}}
			dv.Spec.Storage = &cdiv1.StorageSpec{Resources: size}
		}},
		{"http and upload", "spec.source.http and spec.source.upload are set; expected exactly one", func(dv *cdiv1.DataVolume) {
			dv.Spec.Source = &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://h/i"}, Upload: &cdiv1.DataVolumeSourceUpload{}}
			dv.Spec.Storage = &cdiv1.StorageSpec{Resources: size}
		}},
		{"upload without size", "spec.storage.resources.requests.storage is missing", func(dv *cdiv1.DataVolume) {
			dv.Spec.Source = &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}
			dv.Spec.Storage = &cdiv1.StorageSpec{}
		}},
		{"no size", "spec.storage.resources.requests.storage is missing", func(dv *cdiv1.DataVolume) {
			dv.Spec.Source = &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}
			dv.Spec.Storage = &cdiv1.StorageSpec{}
		}},
		{"no claim", "expected spec.pvc or spec.storage", func(dv *cdiv1.DataVolume) {
			dv.Spec.Source = &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}
		}},
	}
	for _, tc := range errs {
		dv := base()
		tc.mut(dv)
		_, err := NewPVC(dv, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "DataVolume n/d: ") {
			t.Errorf("%s: error %v, want one naming DataVolume n/d and containing %q", tc.name, err, tc.want)
		}
	}
}
