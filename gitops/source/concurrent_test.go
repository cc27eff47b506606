package source

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentFetch runs many Fetches of one URL at once, from one Fetcher
// and from two Fetchers sharing a cache directory, starting from an empty
// cache. Run with -race.
func TestConcurrentFetch(t *testing.T) {
	f := newFixture(t)
	srv := newHTTPGit(t, f.root)
	refs := []struct {
		ref    Ref
		commit string
		file   string
	}{
		{Ref{}, f.c2, "trunk-2"},
		{Ref{Branch: "dev"}, f.d1, "dev-1"},
		{Ref{Tag: "v1"}, f.c1, "trunk-1"},
		{Ref{Commit: f.d1}, f.d1, "dev-1"},
	}
	for _, kind := range []string{"path", "http"} {
		t.Run(kind, func(t *testing.T) {
			url := urlsFor(t, f, srv)[kind]
			cacheDir := t.TempDir()
			fetchers := []*Fetcher{NewFetcher(Options{CacheDir: cacheDir}), NewFetcher(Options{CacheDir: cacheDir})}
			const n = 16
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					want := refs[i%len(refs)]
					a, err := fetchers[i%2].Fetch(t.Context(), Source{URL: url, Ref: want.ref})
					if err != nil {
						errs <- err
						return
					}
					if a.Commit != want.commit {
						errs <- fmt.Errorf("%v: commit %s, want %s", want.ref, a.Commit, want.commit)
						return
					}
					b, err := os.ReadFile(filepath.Join(a.Dir, "config", "hco.yaml"))
					if err != nil || string(b) != want.file {
						errs <- fmt.Errorf("%v: config/hco.yaml = %q, %v; want %q", want.ref, b, err, want.file)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// One clone, no leftovers from clones that lost a race.
			root := cacheRoot(t, cacheDir)
			entries, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if got := strings.Join(names, ","); got != "repo,url,worktrees" {
				t.Fatalf("cache root holds %s, want repo,url,worktrees", got)
			}
			if p := packs(t, root); len(p) < 1 {
				t.Fatalf("no packs in the clone")
			}
		})
	}
}
