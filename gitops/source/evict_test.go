package source

import (
	"os"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/gitserver"
)

func TestMaxCacheBytes(t *testing.T) {
	root := t.TempDir()
	urls := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		repo := gitserver.NewRepo(t, root, name, "main")
		repo.Commit(t, name, map[string]string{"config/hco.yaml": name + "\n"})
		urls[name] = repo.Dir
	}
	cacheDir := t.TempDir()
	rootOf := func(name string) string {
		ep, err := parseURL(urls[name])
		if err != nil {
			t.Fatal(err)
		}
		c, err := newCache(cacheDir, ep, "", nil, time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		return c.root
	}
	exists := func(name string) bool {
		_, err := os.Stat(rootOf(name))
		return err == nil
	}
	fetch := func(name string, max int64) Artifact {
		t.Helper()
		a, err := NewFetcher(Options{CacheDir: cacheDir, MaxCacheBytes: max}).Fetch(t.Context(), Source{URL: urls[name]})
		if err != nil {
			t.Fatal(err)
		}
		assertTree(t, a, name+"\n")
		return a
	}
	fillAll := func() (sizes map[string]int64) {
		sizes = map[string]int64{}
		for _, name := range []string{"a", "b", "c"} { // a is the least recently used
			fetch(name, 0)
			sizes[name] = dirSize(rootOf(name))
		}
		return sizes
	}

	sizes := fillAll()
	t.Logf("per-URL cache sizes: %v bytes", sizes)

	// Room for b and c: a, the least recently used, goes.
	bound := sizes["b"] + sizes["c"] + sizes["a"]/2
	fetch("c", bound)
	if exists("a") || !exists("b") || !exists("c") {
		t.Fatalf("bound %d: a %v b %v c %v; want only a evicted", bound, exists("a"), exists("b"), exists("c"))
	}
	if total := dirSize(cacheDir); total > bound {
		t.Fatalf("cache holds %d bytes, bound %d", total, bound)
	}

	// A directory another Fetch holds is not evicted.
	sizes = fillAll()
	unlock, err := lock(t.Context(), rootOf("a"))
	if err != nil {
		t.Fatal(err)
	}
	fetch("c", 1)
	if !exists("a") || exists("b") || !exists("c") {
		t.Fatalf("with a locked: a %v b %v c %v; want only b evicted", exists("a"), exists("b"), exists("c"))
	}
	unlock()

	// The URL just fetched stays even when it alone exceeds the bound.
	a := fetch("c", 1)
	if exists("a") || exists("b") || !exists("c") {
		t.Fatalf("bound 1: a %v b %v c %v; want only c", exists("a"), exists("b"), exists("c"))
	}
	assertTree(t, a, "c\n")
	entries, _ := os.ReadDir(cacheDir)
	if len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want 1 (no leftovers from eviction)", len(entries))
	}
	// An evicted URL is simply cloned again.
	fetch("a", 0)
}
