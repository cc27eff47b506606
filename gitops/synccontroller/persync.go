package synccontroller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// perSync keeps one value of T per Sync: the Reconciler's last rendering
// (rendering) and last complete apply (settledSync) of each. The zero
// value is empty and usable; safe for concurrent use.
type perSync[T any] struct {
	mu   sync.Mutex
	last map[types.NamespacedName]T
}

// get gives k's value; ok is false when there is none (v is T's zero).
func (m *perSync[T]) get(k types.NamespacedName) (v T, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok = m.last[k]
	return v, ok
}

func (m *perSync[T]) put(k types.NamespacedName, v T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.NamespacedName]T{}
	}
	m.last[k] = v
}

func (m *perSync[T]) forget(k types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, k)
}
