package measure

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSSMiB returns the resident set size (VmRSS) of process pid in MiB, from
// /proc/<pid>/status.
func RSSMiB(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	mib, err := VmRSS(string(status))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return mib, nil
}

// VmRSS returns the VmRSS line of a /proc/<pid>/status text in MiB; the
// kernel writes it in kB ("VmRSS:   1234 kB").
func VmRSS(status string) (float64, error) {
	for l := range strings.Lines(status) {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "VmRSS:" {
			continue
		}
		if len(f) != 3 || f[2] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q: want \"VmRSS: <n> kB\"", strings.TrimSpace(l))
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS line %q: %w", strings.TrimSpace(l), err)
		}
		return kb / 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line (a kernel thread or a zombie has none)")
}
