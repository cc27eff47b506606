package instancetype

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// conflictsFmt is KubeVirt's message for fields a VM sets that its
// instancetype sets too (kubevirt pkg/instancetype/conflict/conflicts.go).
const conflictsFmt = "VM field(s) %s conflicts with selected instance type"

// Conflict is one field of a VM (or VMI) spec that the selected
// instancetype also sets, or a check of the instancetype and preference
// that failed (Message set), as KubeVirt's conflict.Conflict.
type Conflict struct {
	// Path is the field's path from the object's root.
	Path *field.Path
	// Message, when set, replaces the conflict message.
	Message string
}

// Error gives Message, or KubeVirt's conflict message naming Path.
func (c *Conflict) Error() string {
	if c.Message != "" {
		return c.Message
	}
	return fmt.Sprintf(conflictsFmt, c.Path.String())
}

// Conflicts are the conflicts of one expansion; an empty list is none.
type Conflicts []*Conflict

// String gives the paths, comma-separated.
func (cs Conflicts) String() string {
	paths := make([]string, len(cs))
	for i, c := range cs {
		paths[i] = c.Path.String()
	}
	return strings.Join(paths, ", ")
}

// Error gives KubeVirt's message naming every path ("VM field(s)
// spec.template.spec.domain.cpu.sockets, … conflicts with selected
// instance type").
func (cs Conflicts) Error() string {
	return fmt.Sprintf(conflictsFmt, cs.String())
}

// child gives the conflict at base's child path.
func child(base *field.Path, name string, more ...string) *Conflict {
	return &Conflict{Path: base.Child(name, more...)}
}
