//go:build linux

package poolmount

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// mountPoint is one line of /proc/self/mountinfo, the fields poolmount
// uses (proc(5)).
type mountPoint struct {
	// root is the directory of the filesystem mounted (field 4), path the
	// mount point (field 5), both unescaped.
	root, path string
}

// mountsAt gives the mounts of this mount namespace whose mount point is
// path, in mount order (the last one is the visible one), read from
// /proc/self/mountinfo.
func mountsAt(path string) ([]mountPoint, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := parseMountInfo(f)
	if err != nil {
		return nil, fmt.Errorf("/proc/self/mountinfo: %w", err)
	}
	var out []mountPoint
	for _, m := range all {
		if m.path == path {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseMountInfo reads mountinfo lines from r.
func parseMountInfo(r io.Reader) ([]mountPoint, error) {
	var out []mountPoint
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("malformed line %q", s.Text())
		}
		out = append(out, mountPoint{root: unescape(f[3]), path: unescape(f[4])})
	}
	return out, s.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space, \011,
// \012, \134).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
