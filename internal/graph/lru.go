package graph

import (
	"container/list"
	"sync"
)

// lru is a least-recently-used cache of values by a SHA-256 key, which
// keeps and gives copies (clone), so that a caller may change what it
// gets. Safe for concurrent use.
type lru[T any] struct {
	mu      sync.Mutex
	size    int
	clone   func(T) T
	order   *list.List // of *lruEntry[T], most recent first
	entries map[[32]byte]*list.Element
}

type lruEntry[T any] struct {
	key [32]byte
	v   T
}

// newLRU gives a cache of size entries copying with clone; 0 keeps
// nothing.
func newLRU[T any](size int, clone func(T) T) *lru[T] {
	return &lru[T]{size: size, clone: clone, order: list.New(), entries: map[[32]byte]*list.Element{}}
}

// get gives a copy of the value cached under key; ok is false when there
// is none.
func (c *lru[T]) get(key [32]byte) (v T, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return v, false
	}
	c.order.MoveToFront(el)
	return c.clone(el.Value.(*lruEntry[T]).v), true
}

// put caches a copy of v under key, dropping the least recently used
// entry beyond the cache's size.
func (c *lru[T]) put(key [32]byte, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size <= 0 {
		return
	}
	if el, ok := c.entries[key]; ok {
		el.Value.(*lruEntry[T]).v = c.clone(v)
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(&lruEntry[T]{key: key, v: c.clone(v)})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*lruEntry[T]).key)
	}
}
