package domain_test

import (
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// TestSMM: spec.domain.features.smm turns System Management Mode on unless
// disabled, EFI secure boot turns it on by itself, and secure boot with
// smm.enabled: false is refused with the field's path.
func TestSMM(t *testing.T) {
	on, off := true, false
	efi := func(secure *bool) *kubevirtv1.Firmware {
		return &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: secure}}}
	}
	for _, tc := range []struct {
		name     string
		smm      *kubevirtv1.FeatureState
		firmware *kubevirtv1.Firmware
		want     bool
		err      string
	}{
		{name: "unset"},
		{name: "smm: {}", smm: &kubevirtv1.FeatureState{}, want: true},
		{name: "enabled", smm: &kubevirtv1.FeatureState{Enabled: &on}, want: true},
		{name: "disabled", smm: &kubevirtv1.FeatureState{Enabled: &off}},
		{name: "secure boot by default", firmware: efi(nil), want: true},
		{name: "efi without secure boot", firmware: efi(&off)},
		{name: "fedora preference: smm and secure boot", smm: &kubevirtv1.FeatureState{}, firmware: efi(&on), want: true},
		{name: "secure boot with smm disabled", smm: &kubevirtv1.FeatureState{Enabled: &off}, firmware: efi(nil),
			err: "spec.domain.features.smm.enabled: false: EFI secure boot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := tinyVMI()
			if tc.smm != nil {
				vmi.Spec.Domain.Features = &kubevirtv1.Features{SMM: tc.smm}
			}
			vmi.Spec.Domain.Firmware = tc.firmware
			d, err := domain.Build(vmi, domain.DefaultOptions())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := d.Features.SMM != nil && d.Features.SMM.State == "on"
			if got != tc.want {
				t.Errorf("SMM on = %v, want %v", got, tc.want)
			}
		})
	}
}
