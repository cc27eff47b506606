package graph

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
)

// DefaultRolesCacheSize is how many role derivations an engine keeps: one
// per operand CR of each kind, with room for a CR's last few specs. An
// operator derives its CR's roles again at every reconcile (a watched
// pod, its own status write, a requeue while the roles are not ready),
// mostly from the same CR and inputs.
const DefaultRolesCacheSize = 16

// rolesKey digests everything Roles reads besides the engine's CUE: the
// kind, what the definition sees of the CR (cr: roleInput's JSON), the namespace, the
// images and the inputs (an EmbeddedPackage by its name: the package is
// part of the module). ok is false when a value does not marshal to JSON;
// that derivation is not cached.
func rolesKey(module [32]byte, kind string, cr []byte, in RoleInputs) (key [32]byte, ok bool) {
	h := sha256.New()
	h.Write(module[:])
	writeBytes(h, 'k', []byte(kind))
	writeBytes(h, 'c', cr)
	for _, part := range []struct {
		tag byte
		v   any
	}{{'n', in.Namespace}, {'i', in.Images}, {'p', in.Inputs}} {
		b, err := json.Marshal(part.v) // map keys sorted
		if err != nil {
			return key, false
		}
		writeBytes(h, part.tag, b)
	}
	copy(key[:], h.Sum(nil))
	return key, true
}

// clone copies r, its own objects deeply; the shared objects, which are
// never changed, by reference.
func (r *Roles) clone() *Roles {
	out := &Roles{Refusals: slices.Clone(r.Refusals), shared: r.shared}
	for _, o := range r.Objects {
		out.Objects = append(out.Objects, o.DeepCopy())
	}
	return out
}
