package scale

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is one point of a sweep: Objects (VMs, Syncs) spread over Hosts
// (simulated nodes, target API servers).
type Size struct{ Objects, Hosts int }

func (s Size) String() string { return fmt.Sprintf("%d/%d", s.Objects, s.Hosts) }

// ParseSizes reads a sweep written "OBJECTS/HOSTS,…" (e.g.
// "100/5,250/10"), as the CONVERGE_SCALE_* variables of `make
// bench-scale` hold. Each count must be a positive integer with at least
// one object per host, and the sizes must grow strictly (the curves are
// drawn in that order and each size's cost is compared with the first's).
// Errors name the variable (what) and the entry.
func ParseSizes(what, s string) ([]Size, error) {
	var out []Size
	for i, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		o, h, ok := strings.Cut(e, "/")
		if !ok {
			return nil, fmt.Errorf("%s entry %d %q: want OBJECTS/HOSTS such as 100/5", what, i+1, e)
		}
		var sz Size
		for _, f := range []struct {
			name string
			s    string
			n    *int
		}{{"objects", o, &sz.Objects}, {"hosts", h, &sz.Hosts}} {
			n, err := strconv.Atoi(f.s)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s entry %d %q: %s %q, want a positive integer", what, i+1, e, f.name, f.s)
			}
			*f.n = n
		}
		if sz.Objects < sz.Hosts {
			return nil, fmt.Errorf("%s entry %d %q: fewer objects than hosts", what, i+1, e)
		}
		if len(out) > 0 && sz.Objects <= out[len(out)-1].Objects {
			return nil, fmt.Errorf("%s entry %d %q: %d objects, want more than the previous entry's %d", what, i+1, e, sz.Objects, out[len(out)-1].Objects)
		}
		out = append(out, sz)
	}
	return out, nil
}
