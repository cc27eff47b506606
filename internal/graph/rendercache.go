package graph

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"io/fs"
	"maps"
	"slices"

	"cuelang.org/go/cue"
)

// DefaultRenderCacheSize is how many derivations an engine keeps: a
// controller renders a handful of configs (one per Sync, the webhook's
// HC), each again at every resync until it changes.
const DefaultRenderCacheSize = 16

// SetRenderCacheSize makes the engine keep its last n derivations (0:
// none, every render derives the graph), dropping those it keeps. A new
// engine keeps DefaultRenderCacheSize. A cached derivation is served to a
// render of the same HyperConverged, HostPathProvisioner, facts and
// operators mode (renderKey), copied; the CRDs and the workloads are added
// and checked at every render.
func (e *Engine) SetRenderCacheSize(n int) {
	defer e.Lock()()
	e.cache = newRenderCache(n)
}

// renderCache is a least-recently-used cache of derivations (what derive
// gives: the nodes, unordered, and the rest of the graph's output, without
// the CRDs and the workloads) by renderKey. It keeps and gives copies: a
// caller may change what it gets. Safe for concurrent use.
type renderCache = lru[*Rendered]

// newRenderCache gives a cache of size entries; 0 keeps nothing.
func newRenderCache(size int) *renderCache {
	return newLRU(size, (*Rendered).clone)
}

// clone copies what a derivation holds (not CRDs and Stages, which
// render adds afterwards), objects deeply.
func (r *Rendered) clone() *Rendered {
	out := &Rendered{
		HyperConverged: r.HyperConverged.DeepCopy(),
		OwnedByHC:      maps.Clone(r.OwnedByHC),
		Tainted:        slices.Clone(r.Tainted),
		Health:         maps.Clone(r.Health),
		Version:        r.Version,
		Operators:      r.Operators,
	}
	for _, n := range r.Nodes {
		c := Node{Name: n.Name, DependsOn: slices.Clone(n.DependsOn)}
		for _, o := range n.Objects {
			c.Objects = append(c.Objects, o.DeepCopy())
		}
		out.Nodes = append(out.Nodes, c)
	}
	for _, ir := range r.IgnoreRules {
		ir.Paths = slices.Clone(ir.Paths)
		out.IgnoreRules = append(out.IgnoreRules, ir)
	}
	return out
}

// renderKey digests everything a derivation reads: the engine's CUE
// module (module, its SHA-256), the HC document hc (its operators mode
// already written), the HPP document hpp (or its absence) and the facts
// as JSON, the form Facts compiles them from. ok is false when hc or hpp
// is not plain data (see writeData): two such documents could give the
// same digest and derive differently, so their renders are not cached.
func renderKey(module [32]byte, hc, hpp cue.Value, facts map[string]any) (key [32]byte, ok bool) {
	h := sha256.New()
	h.Write(module[:])
	if !writeData(h, hc) {
		return key, false
	}
	if hpp.Exists() {
		h.Write([]byte{'+'})
		if !writeData(h, hpp) {
			return key, false
		}
	} else {
		h.Write([]byte{'-'})
	}
	b, err := json.Marshal(facts) // map keys sorted
	if err != nil {
		return key, false
	}
	writeBytes(h, 'f', b)
	copy(key[:], h.Sum(nil))
	return key, true
}

// writeData writes v to h unambiguously (each node a tag and a
// length-prefixed content) and reports whether v is plain data, as the
// config loader gives documents: concrete structs of regular fields,
// lists and scalars, without defaults, closed structs, definitions,
// hidden, optional or required fields, or pattern constraints, which the
// written form would not show.
func writeData(h hash.Hash, v cue.Value) bool {
	if _, isDefault := v.Default(); isDefault || v.IsClosed() {
		return false
	}
	switch v.Kind() {
	case cue.StructKind:
		if v.LookupPath(cue.MakePath(cue.AnyString)).Exists() {
			return false
		}
		it, err := v.Fields(cue.All())
		if err != nil {
			return false
		}
		h.Write([]byte{'{'})
		for it.Next() {
			sel := it.Selector()
			if sel.LabelType() != cue.StringLabel || sel.ConstraintType() != 0 {
				return false
			}
			writeBytes(h, 'k', []byte(sel.Unquoted()))
			if !writeData(h, it.Value()) {
				return false
			}
		}
		h.Write([]byte{'}'})
	case cue.ListKind:
		if v.LookupPath(cue.MakePath(cue.AnyIndex)).Exists() {
			return false
		}
		it, err := v.List()
		if err != nil {
			return false
		}
		h.Write([]byte{'['})
		for it.Next() {
			if !writeData(h, it.Value()) {
				return false
			}
		}
		h.Write([]byte{']'})
	case cue.NullKind, cue.BoolKind, cue.IntKind, cue.FloatKind, cue.StringKind, cue.BytesKind:
		b, err := v.MarshalJSON()
		if err != nil {
			return false
		}
		writeBytes(h, byte('0'+kindIndex(v.Kind())), b)
	default:
		return false
	}
	return true
}

// kindIndex numbers the scalar kinds, so that the int 1 and the float 1
// (both "1" in JSON) write differently.
func kindIndex(k cue.Kind) int {
	return slices.Index([]cue.Kind{cue.NullKind, cue.BoolKind, cue.IntKind, cue.FloatKind, cue.StringKind, cue.BytesKind}, k)
}

func writeBytes(h hash.Hash, tag byte, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte{tag})
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

// moduleDigest is the SHA-256 of every file of the CUE module fsys, each
// by path and content, in fs.WalkDir's (lexical) order.
func moduleDigest(fsys fs.FS) ([32]byte, error) {
	var out [32]byte
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		writeBytes(h, 'p', []byte(path))
		writeBytes(h, 'c', b)
		return nil
	})
	copy(out[:], h.Sum(nil))
	return out, err
}
