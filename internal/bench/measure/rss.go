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

// PeakRSSMiB returns the peak resident set size (VmHWM, the high-water
// mark since the process started) of process pid in MiB, from
// /proc/<pid>/status.
func PeakRSSMiB(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	mib, err := statusMiB(string(status), "VmHWM")
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return mib, nil
}

// RSS is a process's resident memory in MiB split by what backs it, from
// /proc/<pid>/status: Anon (RssAnon: heap, stacks, everything the process
// allocated) and File (RssFile: mapped file pages, mostly the
// executable's own text and read-only data, shared and reclaimable but
// counted in VmRSS and in the container's working set).
type RSS struct{ Anon, File float64 }

// RSSPartsMiB returns the RssAnon and RssFile of process pid in MiB.
func RSSPartsMiB(pid int) (RSS, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return RSS{}, err
	}
	r, err := RSSParts(string(status))
	if err != nil {
		return RSS{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return r, nil
}

// RSSParts reads the RssAnon and RssFile lines of a /proc/<pid>/status
// text, in kB, as MiB.
func RSSParts(status string) (RSS, error) {
	var r RSS
	var err error
	if r.Anon, err = statusMiB(status, "RssAnon"); err != nil {
		return RSS{}, err
	}
	if r.File, err = statusMiB(status, "RssFile"); err != nil {
		return RSS{}, err
	}
	return r, nil
}

// VmRSS returns the VmRSS line of a /proc/<pid>/status text in MiB; the
// kernel writes it in kB ("VmRSS:   1234 kB").
func VmRSS(status string) (float64, error) { return statusMiB(status, "VmRSS") }

// statusMiB returns the line key of a /proc/<pid>/status text, a size in
// kB, in MiB.
func statusMiB(status, key string) (float64, error) {
	for l := range strings.Lines(status) {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != key+":" {
			continue
		}
		if len(f) != 3 || f[2] != "kB" {
			return 0, fmt.Errorf("%s line %q: want \"%s: <n> kB\"", key, strings.TrimSpace(l), key)
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s line %q: %w", key, strings.TrimSpace(l), err)
		}
		return kb / 1024, nil
	}
	return 0, fmt.Errorf("no %s line (a kernel thread or a zombie has none)", key)
}
