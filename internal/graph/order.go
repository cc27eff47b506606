package graph

import (
	"fmt"
	"sort"
	"strings"
)

// order sorts r.Nodes topologically (by name within a level) and builds
// r.Stages: the CRDs, then one stage per dependency level. It fails on a
// dependency on an unknown node or a cycle.
func (r *Rendered) order() error {
	byName := map[string]Node{}
	for _, n := range r.Nodes {
		byName[n.Name] = n
	}
	levels, err := Levels(deps(r.Nodes))
	if err != nil {
		return err
	}
	r.Nodes = r.Nodes[:0]
	r.Stages = []Stage{{Name: "crds", Objects: r.CRDs}}
	for _, level := range levels {
		st := Stage{Name: strings.Join(level, "+"), Nodes: level}
		for _, name := range level {
			r.Nodes = append(r.Nodes, byName[name])
			st.Objects = append(st.Objects, byName[name].Objects...)
		}
		if len(st.Objects) > 0 {
			r.Stages = append(r.Stages, st)
		}
	}
	return nil
}

func deps(nodes []Node) map[string][]string {
	m := map[string][]string{}
	for _, n := range nodes {
		m[n.Name] = n.DependsOn
	}
	return m
}

// Levels takes node → dependencies and gives the nodes in dependency
// levels: level 0 has no dependencies, level k depends only on levels < k;
// names within a level are sorted. It fails naming the node on an unknown
// dependency, and naming the nodes left on a cycle.
func Levels(deps map[string][]string) ([][]string, error) {
	level := map[string]int{}
	var names []string
	for n, ds := range deps {
		names = append(names, n)
		for _, d := range ds {
			if _, ok := deps[d]; !ok {
				return nil, fmt.Errorf("component %q depends on unknown component %q", n, d)
			}
		}
	}
	sort.Strings(names)
	for placed := 0; placed < len(names); {
		progress := false
		for _, n := range names {
			if _, done := level[n]; done {
				continue
			}
			l, ready := 0, true
			for _, d := range deps[n] {
				dl, ok := level[d]
				if !ok {
					ready = false
					break
				}
				l = max(l, dl+1)
			}
			if ready {
				level[n] = l
				placed++
				progress = true
			}
		}
		if !progress {
			var left []string
			for _, n := range names {
				if _, ok := level[n]; !ok {
					left = append(left, n)
				}
			}
			return nil, fmt.Errorf("dependency cycle among components %s", strings.Join(left, ", "))
		}
	}
	var out [][]string
	for _, n := range names {
		l := level[n]
		for len(out) <= l {
			out = append(out, nil)
		}
		out[l] = append(out[l], n)
	}
	return out, nil
}
