package kvmprobe

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Paths are where ReadFacts looks; tests point them at fixtures.
type Paths struct {
	// Device is the KVM device, /dev/kvm.
	Device string
	// CPUInfo is /proc/cpuinfo.
	CPUInfo string
	// SysModule is /sys/module, which lists loaded and built-in modules
	// that have parameters (kvm, kvm_intel, kvm_amd and kvm_pvm all do).
	SysModule string
}

// DefaultPaths gives the host's paths.
func DefaultPaths() Paths {
	return Paths{Device: "/dev/kvm", CPUInfo: "/proc/cpuinfo", SysModule: "/sys/module"}
}

// kvmModules are the modules ReadFacts looks for.
var kvmModules = []string{"kvm", "kvm_intel", "kvm_amd", "kvm_pvm"}

// Facts are what the node says about KVM without running anything.
type Facts struct {
	// Device is true when the KVM device exists and is a character
	// device; DeviceDetail says what was found otherwise.
	Device       bool
	DeviceDetail string
	// FlagsKnown is true when the CPU flags were read; VMX, SVM and
	// Hypervisor are the flags vmx (Intel VT-x), svm (AMD-V) and
	// hypervisor (this is a guest).
	FlagsKnown           bool
	VMX, SVM, Hypervisor bool
	// ModulesKnown is true when the module directory was read; Modules
	// are the kvm modules found there, in kvmModules' order.
	ModulesKnown bool
	Modules      []string
}

// HasModule reports whether name was found.
func (f Facts) HasModule(name string) bool {
	for _, m := range f.Modules {
		if m == name {
			return true
		}
	}
	return false
}

// ReadFacts reads the static facts from p. What cannot be read is left
// unknown (FlagsKnown, ModulesKnown false), never guessed.
func ReadFacts(p Paths) Facts {
	var f Facts
	switch st, err := os.Stat(p.Device); {
	case err != nil:
		f.DeviceDetail = err.Error()
	case st.Mode()&os.ModeCharDevice == 0:
		f.DeviceDetail = fmt.Sprintf("%s is not a character device (mode %s)", p.Device, st.Mode())
	default:
		f.Device = true
	}
	if flags, err := cpuFlags(p.CPUInfo); err == nil {
		f.FlagsKnown = true
		f.VMX, f.SVM, f.Hypervisor = flags["vmx"], flags["svm"], flags["hypervisor"]
	}
	if _, err := os.Stat(p.SysModule); err == nil {
		f.ModulesKnown = true
		for _, m := range kvmModules {
			if _, err := os.Stat(filepath.Join(p.SysModule, m)); err == nil {
				f.Modules = append(f.Modules, m)
			}
		}
	}
	return f
}

// cpuFlags gives the flags of the first processor in a /proc/cpuinfo file.
func cpuFlags(path string) (map[string]bool, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		key, value, ok := strings.Cut(s.Text(), ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		flags := map[string]bool{}
		for _, fl := range strings.Fields(value) {
			flags[fl] = true
		}
		return flags, nil
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no flags line", path)
}
