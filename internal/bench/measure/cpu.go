package measure

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of the CPU times of /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (the kernel's ABI since
// 2.6; sysconf(_SC_CLK_TCK) would need cgo).
const ClockTicks = 100

// CPUSeconds returns the CPU time process pid has used so far, user plus
// system, in seconds, from /proc/<pid>/stat.
func CPUSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s, err := StatCPU(string(stat))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// StatCPU returns utime + stime (fields 14 and 15, in ClockTicks) of a
// /proc/<pid>/stat line in seconds. The command name (field 2, in
// parentheses) may hold spaces and parentheses, so fields are counted
// from the last ')'.
func StatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("want \"pid (comm) state …\", got %q", truncate(stat))
	}
	// After ')': state is field 3, so utime (14) is index 11, stime index 12.
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		ticks += float64(n)
	}
	return ticks / ClockTicks, nil
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
