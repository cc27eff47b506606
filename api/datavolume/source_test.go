package datavolume

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func TestSourceKind(t *testing.T) {
	url := "docker://quay.io/containerdisks/fedora:40"
	reg := func(r cdiv1.DataVolumeSourceRegistry) *cdiv1.DataVolumeSource {
		if r.URL == nil && r.ImageStream == nil {
			r.URL = &url
		}
		return &cdiv1.DataVolumeSource{Registry: &r}
	}
	str := func(s string) *string { return &s }
	method := func(m cdiv1.RegistryPullMethod) *cdiv1.RegistryPullMethod { return &m }
	for _, tc := range []struct {
		name   string
		source *cdiv1.DataVolumeSource
		ct     cdiv1.DataVolumeContentType
		ref    bool
		want   string
		upload bool
		err    string
	}{
		{"http", &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://h/i"}}, "", false, SourceHTTP, false, ""},
		{"blank", &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, "", false, SourceNone, false, ""},
		{"upload", &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}, "", false, SourceUpload, true, ""},
		{"registry", reg(cdiv1.DataVolumeSourceRegistry{}), "", false, SourceRegistry, false, ""},
		{"registry pullMethod node, secret, CA", reg(cdiv1.DataVolumeSourceRegistry{PullMethod: method(cdiv1.RegistryPullNode), SecretRef: str("s"), CertConfigMap: str("c")}), cdiv1.DataVolumeKubeVirt, false, SourceRegistry, false, ""},
		{"registry oci-archive", reg(cdiv1.DataVolumeSourceRegistry{URL: str("oci-archive:///images/fedora.tar")}), "", false, SourceRegistry, false, ""},
		{"registry archive content", reg(cdiv1.DataVolumeSourceRegistry{}), cdiv1.DataVolumeArchive, false, "", false,
			`DataVolume n/d: spec.contentType "archive": ContentType must be kubevirt when Source is Registry`},
		{"registry http scheme", reg(cdiv1.DataVolumeSourceRegistry{URL: str("https://quay.io/x")}), "", false, "", false,
			`DataVolume n/d: spec.source.registry.url: "https://quay.io/x": scheme "https" is not docker or oci-archive`},
		{"registry no scheme", reg(cdiv1.DataVolumeSourceRegistry{URL: str("quay.io/x:1")}), "", false, "", false,
			`spec.source.registry.url: "quay.io/x:1": expected docker://HOST/REPOSITORY:TAG or oci-archive://PATH`},
		{"registry bad reference", reg(cdiv1.DataVolumeSourceRegistry{URL: str("docker://quay.io/X Y:1")}), "", false, "", false,
			`spec.source.registry.url: "docker://quay.io/X Y:1": `},
		{"registry image stream", reg(cdiv1.DataVolumeSourceRegistry{ImageStream: str("fedora"), PullMethod: method(cdiv1.RegistryPullNode)}), "", false, "", false,
			"spec.source.registry.imageStream: OpenShift image streams are not supported by converge"},
		{"registry url and image stream", reg(cdiv1.DataVolumeSourceRegistry{URL: &url, ImageStream: str("fedora")}), "", false, "", false,
			"spec.source.registry: both url and imageStream are set"},
		{"registry pull method", reg(cdiv1.DataVolumeSourceRegistry{PullMethod: method("kubelet")}), "", false, "", false,
			`spec.source.registry.pullMethod "kubelet": expected pod or node`},
		{"http without url", &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{}}, "", false, "", false, "DataVolume n/d: spec.source.http.url is empty"},
		{"blank and upload", &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}, Upload: &cdiv1.DataVolumeSourceUpload{}}, "", false, "", true,
			"DataVolume n/d: spec.source.upload and spec.source.blank are set; expected exactly one of"},
		{"s3", &cdiv1.DataVolumeSource{S3: &cdiv1.DataVolumeSourceS3{URL: "s3://b/k"}}, "", false, "", false,
			"DataVolume n/d: spec.source.s3: not supported by converge; expected one of spec.source.http, spec.source.registry, spec.source.pvc, spec.source.blank, spec.source.upload or spec.sourceRef"},
		{"sourceRef", nil, "", true, SourceRef, false, ""},
		{"sourceRef and a source", &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, "", true, "", false, "DataVolume n/d: spec.sourceRef and spec.source.blank are set; expected exactly one of"},
		{"pvc", &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "n", Name: "golden"}}, "", false, SourcePVC, false, ""},
		{"pvc without namespace", &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Name: "golden"}}, "", false, SourcePVC, false, ""},
		{"pvc of another namespace (authorized by the webhook)", &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "images", Name: "golden"}}, "", false, SourcePVC, false, ""},
		{"pvc without name", &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "n"}}, "", false, "", false, "spec.source.pvc.name: empty"},
		{"snapshot", &cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Namespace: "n", Name: "s"}}, "", false, "", false, "spec.source.snapshot: not supported by converge"},
		{"none", nil, "", false, "", false, "DataVolume n/d: expected exactly one of spec.source.http, spec.source.registry, spec.source.pvc, spec.source.blank, spec.source.upload or spec.sourceRef"},
	} {
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "d"}, Spec: cdiv1.DataVolumeSpec{Source: tc.source, ContentType: tc.ct}}
		if tc.ref {
			dv.Spec.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "x"}
		}
		got, err := SourceKind(dv)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: SourceKind = %q, %v; want %q, %q", tc.name, got, err, tc.want, tc.err)
		}
		if IsUpload(dv) != tc.upload {
			t.Errorf("%s: IsUpload = %v, want %v", tc.name, !tc.upload, tc.upload)
		}
	}
}

func TestParseRegistryURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want RegistryURL
		err  string
	}{
		{url: "docker://registry:5000/kubevirt/alpine-container-disk-demo:devel", want: RegistryURL{Scheme: "docker", Image: "registry:5000/kubevirt/alpine-container-disk-demo:devel"}},
		{url: "docker://quay.io/containerdisks/fedora@sha256:" + strings.Repeat("a", 64), want: RegistryURL{Scheme: "docker", Image: "quay.io/containerdisks/fedora@sha256:" + strings.Repeat("a", 64)}},
		{url: "docker://fedora", want: RegistryURL{Scheme: "docker", Image: "fedora"}},
		{url: "oci-archive:///srv/images/fedora.tar", want: RegistryURL{Scheme: "oci-archive", Archive: "srv/images/fedora.tar"}},
		{url: "oci-archive://", err: "expected oci-archive://PATH of an OCI archive file"},
		{url: "docker://", err: `"docker://": `},
		{url: "docker://quay.io/x@sha256:12", err: `"docker://quay.io/x@sha256:12": `},
		{url: "s3://bucket/disk", err: `scheme "s3" is not docker or oci-archive`},
	} {
		got, err := ParseRegistryURL(tc.url)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseRegistryURL(%q) = %+v, %v; want %+v, %q", tc.url, got, err, tc.want, tc.err)
		}
	}
}

func TestCheckClone(t *testing.T) {
	other := "images"
	for _, tc := range []struct {
		name string
		ref  cdiv1.DataVolumeSourceRef
		err  string
	}{
		{"same namespace", cdiv1.DataVolumeSourceRef{Kind: "DataSource", Name: "fedora"}, ""},
		{"another kind", cdiv1.DataVolumeSourceRef{Kind: "PersistentVolumeClaim", Name: "fedora"}, `DataVolume n/d: spec.sourceRef.kind "PersistentVolumeClaim": expected DataSource`},
		{"no name", cdiv1.DataVolumeSourceRef{Kind: "DataSource"}, "DataVolume n/d: spec.sourceRef.name: empty"},
		{"another namespace (authorized by the webhook)", cdiv1.DataVolumeSourceRef{Kind: "DataSource", Namespace: &other, Name: "fedora"}, ""},
	} {
		dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "d"}, Spec: cdiv1.DataVolumeSpec{SourceRef: &tc.ref}}
		err := CheckClone(dv)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
		if !IsClone(dv) {
			t.Errorf("%s: IsClone false", tc.name)
		}
	}
}
