package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestProgressReader checks both renderings: one line per 10 % when not a
// terminal (each step once, even when a read jumps several), a bar redrawn
// in place ending at 100 % and a newline on a terminal.
func TestProgressReader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tty   bool
		chunk int
		want  func(string) bool
	}{
		{"lines, small reads", false, 7, func(s string) bool { return s == " 10%\n 20%\n 30%\n 40%\n 50%\n 60%\n 70%\n 80%\n 90%\n100%\n" }},
		{"lines, one big read", false, 1000, func(s string) bool { return s == " 10%\n 20%\n 30%\n 40%\n 50%\n 60%\n 70%\n 80%\n 90%\n100%\n" }},
		{"bar", true, 100, func(s string) bool {
			return strings.HasPrefix(s, "\r[") && strings.HasSuffix(s, "\n") &&
				strings.Contains(s, "[========================================] 100% 1000 B / 1000 B")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &progressReader{r: bytes.NewReader(make([]byte, 1000)), total: 1000, out: &out, tty: tc.tty, start: time.Now()}
			buf := make([]byte, tc.chunk)
			for {
				if _, err := p.Read(buf); err == io.EOF {
					break
				}
			}
			p.end()
			p.end()
			if !tc.want(out.String()) {
				t.Errorf("output %q", out.String())
			}
		})
	}
	if got := humanBytes(3 << 30); got != "3.0 GiB" {
		t.Errorf("humanBytes(3 GiB) = %q", got)
	}
}
