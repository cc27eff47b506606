package vmdisks_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestCloudInitISO: Prepare writes the cloud-init ISO as KubeVirt's
// pkg/cloud-init does, read back with go-diskfs and blkid (what
// cloud-init's datasource detection uses): NoCloud labelled cidata with
// user-data, meta-data (instance-id, local-hostname, instance-type) and
// network-config; ConfigDrive labelled config-2 under openstack/latest
// (and with xorriso, when installed, as a second reader);
// data inline, base64 or from a Secret (keys userdata/userData,
// networkdata/networkData).
func TestCloudInitISO(t *testing.T) {
	secrets := objects{
		"ns/camel":  {"userData": []byte("#cloud-config\nfrom: camel\n"), "networkData": []byte("version: 2\n")},
		"ns/lower":  {"userdata": []byte("#cloud-config\nfrom: lower\n"), "userData": []byte("not this one")},
		"ns/nokeys": {"other": []byte("x")},
	}
	b64 := base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\necho base64\n"))
	for _, tc := range []struct {
		name      string
		vol       kubevirtv1.Volume
		edit      func(*kubevirtv1.VirtualMachineInstance)
		wantLabel string
		wantFiles map[string]string
		wantRoot  []string
		wantErr   string
	}{
		{
			name: "NoCloud inline with network data",
			vol:  volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\nhostname: x\n", NetworkData: "version: 2\nethernets: {}\n"}}),
			edit: func(v *kubevirtv1.VirtualMachineInstance) {
				v.Annotations = map[string]string{kubevirtv1.ClusterInstancetypeAnnotation: "u1.small"}
			},
			wantLabel: "cidata",
			wantFiles: map[string]string{
				"/user-data":      "#cloud-config\nhostname: x\n",
				"/meta-data":      `{"instance-type":"u1.small","instance-id":"uid-vm","local-hostname":"vm"}`,
				"/network-config": "version: 2\nethernets: {}\n",
			},
			wantRoot: []string{"meta-data", "network-config", "user-data"},
		},
		{
			name: "NoCloud base64, firmware UUID and hostname",
			vol:  volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataBase64: b64}}),
			edit: func(v *kubevirtv1.VirtualMachineInstance) {
				v.Spec.Domain.Firmware = &kubevirtv1.Firmware{UUID: "5d0f3c4e-0000-4000-8000-000000000001"}
				v.Spec.Hostname = "guest"
			},
			wantLabel: "cidata",
			wantFiles: map[string]string{
				"/user-data": "#!/bin/sh\necho base64\n",
				"/meta-data": `{"instance-id":"5d0f3c4e-0000-4000-8000-000000000001","local-hostname":"guest"}`,
			},
			wantRoot: []string{"meta-data", "user-data"},
		},
		{
			name:      "NoCloud from Secrets (userData, networkData keys)",
			vol:       volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "camel"}, NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "camel"}}}),
			wantLabel: "cidata",
			wantFiles: map[string]string{"/user-data": "#cloud-config\nfrom: camel\n", "/network-config": "version: 2\n", "/meta-data": `{"instance-id":"uid-vm","local-hostname":"vm"}`},
			wantRoot:  []string{"meta-data", "network-config", "user-data"},
		},
		{
			name:      "ConfigDrive from a Secret (userdata before userData)",
			vol:       volume("ci", kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "lower"}, NetworkData: `{"links":[]}`}}),
			edit:      func(v *kubevirtv1.VirtualMachineInstance) { v.Name = "web.example" },
			wantLabel: "config-2",
			wantFiles: map[string]string{
				"/openstack/latest/user_data":         "#cloud-config\nfrom: lower\n",
				"/openstack/latest/meta_data.json":    `{"instance_id":"web.example.ns","hostname":"web","uuid":"uid-vm"}`,
				"/openstack/latest/network_data.json": `{"links":[]}`,
			},
			wantRoot: []string{"openstack"},
		},
		{
			name:    "a missing Secret",
			vol:     volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "gone"}}}),
			wantErr: `VirtualMachineInstance ns/vm: volume "ci": user data: Secret ns/gone: ns/gone: not found`,
		},
		{
			name:    "a Secret without the key",
			vol:     volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "nokeys"}}}),
			wantErr: `VirtualMachineInstance ns/vm: volume "ci": network data: Secret ns/nokeys: no key networkdata or networkData`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, state := newDisks(t, secrets, objects{})
			vmi := vmiWith("vm", tc.vol)
			if tc.edit != nil {
				tc.edit(vmi)
			}
			err := d.Prepare(context.Background(), vmi)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Prepare: %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			src, err := d.Resolve(vmi, tc.vol)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for p := range tc.wantFiles {
				paths = append(paths, p)
			}
			label, files := readISO(t, src.Path, paths...)
			if label != tc.wantLabel {
				t.Errorf("label %q, want %q", label, tc.wantLabel)
			}
			for p, want := range tc.wantFiles {
				if files[p] != want {
					t.Errorf("%s = %q, want %q", p, files[p], want)
				}
			}
			if root := listISO(t, src.Path, "/"); !reflect.DeepEqual(root, tc.wantRoot) {
				t.Errorf("ISO root %v, want %v", root, tc.wantRoot)
			}
			if all, ok := xorrisoFiles(t, src.Path); ok {
				if len(all) != len(tc.wantFiles) {
					t.Errorf("xorriso finds files %v, want %d", all, len(tc.wantFiles))
				}
				for p, want := range tc.wantFiles {
					if all[p] != want {
						t.Errorf("xorriso: %s = %q, want %q", p, all[p], want)
					}
				}
			} else {
				t.Log("xorriso not installed: the ISO is read back with go-diskfs and blkid only")
			}
			if typ, label := blkid(t, src.Path); typ != "iso9660" || label != tc.wantLabel {
				t.Errorf("blkid: TYPE=%s LABEL=%s, want iso9660 %s", typ, label, tc.wantLabel)
			}
			if err := d.Release(vmi.Namespace, vmi.Name, vmi.UID); err != nil {
				t.Fatal(err)
			}
			if left := treeFiles(t, filepath.Join(state, "vmis")); len(left) != 0 {
				t.Errorf("after Release: %v", left)
			}
		})
	}
}

// TestCloudInitISORemade: a second Prepare makes the ISO again from the
// Secret's current data.
func TestCloudInitISORemade(t *testing.T) {
	secrets := objects{"ns/ud": {"userdata": []byte("one")}}
	d, _ := newDisks(t, secrets, objects{})
	vol := volume("ci", kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "ud"}}})
	vmi := vmiWith("vm", vol)
	src, _ := d.Resolve(vmi, vol)
	for _, want := range []string{"one", "two, longer than one"} {
		secrets["ns/ud"]["userdata"] = []byte(want)
		if err := d.Prepare(context.Background(), vmi); err != nil {
			t.Fatal(err)
		}
		if _, files := readISO(t, src.Path, "/user-data"); files["/user-data"] != want {
			t.Errorf("user-data %q, want %q", files["/user-data"], want)
		}
	}
}
