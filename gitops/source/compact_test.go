package source

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompactPacks fetches one new commit at a time from a real Git HTTP
// server, full and shallow: the cached clone never holds more than
// MaxPacks packs, every fetch checks out the commit it fetched, and git
// itself finds the compacted clone sound (git fsck) with the whole
// history (full) or the fetched commit (shallow).
func TestCompactPacks(t *testing.T) {
	for _, shallow := range []bool{false, true} {
		t.Run(fmt.Sprintf("shallow=%v", shallow), func(t *testing.T) {
			f := newFixture(t)
			srv := newHTTPGit(t, f.root)
			cacheDir := t.TempDir()
			fetcher := NewFetcher(Options{CacheDir: cacheDir, Shallow: shallow})
			src := Source{URL: urlsFor(t, f, srv)["http"], Ref: Ref{Branch: "trunk"}}
			if _, err := fetcher.Fetch(t.Context(), src); err != nil {
				t.Fatal(err)
			}
			root := cacheRoot(t, cacheDir)
			most, compactions := 0, 0
			for i := 0; i < 2*MaxPacks+3; i++ {
				content := fmt.Sprintf("commit-%d", i)
				want := f.commit(t, content)
				before := len(packs(t, root))
				a, err := fetcher.Fetch(t.Context(), src)
				if err != nil {
					t.Fatalf("fetch %d: %v", i, err)
				}
				if a.Commit != want {
					t.Fatalf("fetch %d: commit %s, want %s", i, a.Commit, want)
				}
				assertTree(t, a, content)
				n := len(packs(t, root))
				if n > MaxPacks {
					t.Fatalf("fetch %d left %d packs, want at most %d", i, n, MaxPacks)
				}
				if n < before {
					compactions++
				}
				most = max(most, n)
			}
			if compactions < 2 || most != MaxPacks {
				t.Errorf("%d compactions, at most %d packs; want at least 2 and %d", compactions, most, MaxPacks)
			}
			repo := filepath.Join(root, "repo")
			runGit(t, repo, "fsck", "--no-dangling")
			commits := strings.Fields(runGit(t, repo, "rev-list", "refs/remotes/origin/trunk"))
			if want := 2*MaxPacks + 3 + 2; !shallow && len(commits) != want {
				t.Errorf("the compacted clone has %d commits on trunk, want %d", len(commits), want)
			}
		})
	}
}
