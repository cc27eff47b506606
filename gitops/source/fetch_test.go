package source

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestFetchRefs(t *testing.T) {
	f := newFixture(t)
	srv := newHTTPGit(t, f.root)

	cases := []struct {
		name                   string
		ref                    Ref
		wantCommit, wantRef    string
		wantRevision, wantFile string
	}{
		{"default branch", Ref{}, f.c2, "refs/heads/trunk", "trunk@sha1:" + f.c2, "trunk-2"},
		{"branch", Ref{Branch: "dev"}, f.d1, "refs/heads/dev", "dev@sha1:" + f.d1, "dev-1"},
		{"annotated tag", Ref{Tag: "v1"}, f.c1, "refs/tags/v1", "v1@sha1:" + f.c1, "trunk-1"},
		{"lightweight tag", Ref{Tag: "light"}, f.d1, "refs/tags/light", "light@sha1:" + f.d1, "dev-1"},
		{"commit", Ref{Commit: f.c1}, f.c1, f.c1, "sha1:" + f.c1, "trunk-1"},
		{"commit on side branch", Ref{Commit: f.d1}, f.d1, f.d1, "sha1:" + f.d1, "dev-1"},
	}
	for kind, url := range urlsFor(t, f, srv) {
		t.Run(kind, func(t *testing.T) {
			// Each ref is fetched into a fresh cache (a clone) and into one
			// cache shared by all cases (fetches into an existing clone).
			sharedDir := t.TempDir()
			shared := NewFetcher(Options{CacheDir: sharedDir})
			for _, tc := range cases {
				for _, cache := range []string{"fresh", "shared"} {
					t.Run(tc.name+"/"+cache, func(t *testing.T) {
						cacheDir, fetcher := sharedDir, shared
						if cache == "fresh" {
							cacheDir = t.TempDir()
							fetcher = NewFetcher(Options{CacheDir: cacheDir})
						}
						a, err := fetcher.Fetch(t.Context(), Source{URL: url, Ref: tc.ref})
						if err != nil {
							t.Fatalf("Fetch: %v", err)
						}
						if a.Commit != tc.wantCommit || a.Ref != tc.wantRef || a.Revision != tc.wantRevision || a.URL != url {
							t.Errorf("got %+v\nwant Commit %s Ref %s Revision %s URL %s", a, tc.wantCommit, tc.wantRef, tc.wantRevision, url)
						}
						if got := readFile(t, a, "config/hco.yaml"); got != tc.wantFile {
							t.Errorf("config/hco.yaml = %q, want %q", got, tc.wantFile)
						}
						if rel, err := filepath.Rel(cacheDir, a.Dir); err != nil || !filepath.IsLocal(rel) {
							t.Errorf("Dir %s is not inside the cache %s", a.Dir, cacheDir)
						}
						if filepath.Base(a.Dir) != tc.wantCommit {
							t.Errorf("Dir %s is not named after the commit", a.Dir)
						}
						if _, err := os.Lstat(filepath.Join(a.Dir, ".git")); !os.IsNotExist(err) {
							t.Errorf("work tree has a .git entry (err %v)", err)
						}
						fi, err := os.Stat(filepath.Join(a.Dir, "run.sh"))
						if err != nil || fi.Mode().Perm()&0o100 == 0 {
							t.Errorf("run.sh is not executable: %v %v", fi, err)
						}
						if target, err := os.Readlink(filepath.Join(a.Dir, "inside")); err != nil || target != "config" {
							t.Errorf("symlink inside -> %q (%v), want config", target, err)
						}
					})
				}
			}
		})
	}
}

// TestLocalURLsShareCache: a path and its file:// URL are the same source.
func TestLocalURLsShareCache(t *testing.T) {
	f := newFixture(t)
	cacheDir := t.TempDir()
	fetcher := NewFetcher(Options{CacheDir: cacheDir})
	for _, url := range []string{f.dir, "file://" + f.dir, f.dir + "/", filepath.Join(f.dir, "config", "..")} {
		a, err := fetcher.Fetch(t.Context(), Source{URL: url})
		if err != nil {
			t.Fatalf("Fetch(%s): %v", url, err)
		}
		if a.Commit != f.c2 {
			t.Fatalf("Fetch(%s) = %s, want %s", url, a.Commit, f.c2)
		}
	}
	cacheRoot(t, cacheDir) // fails unless exactly one per-URL directory
}

// TestCacheIsIndependentOfSource: the cache is a clone, not a view of the
// source; a cached commit stays fetchable after the source is gone.
func TestCacheIsIndependentOfSource(t *testing.T) {
	f := newFixture(t)
	fetcher := NewFetcher(Options{CacheDir: t.TempDir()})
	a, err := fetcher.Fetch(t.Context(), Source{URL: f.dir, Ref: Ref{Branch: "dev"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.dir); err != nil {
		t.Fatal(err)
	}
	assertTree(t, a, "dev-1")
	b, err := fetcher.Fetch(t.Context(), Source{URL: f.dir, Ref: Ref{Commit: f.c1}})
	if err != nil {
		t.Fatalf("cached commit after the source was removed: %v", err)
	}
	assertTree(t, b, "trunk-1")
	if _, err := fetcher.Fetch(t.Context(), Source{URL: f.dir, Ref: Ref{Branch: "dev"}}); !errors.Is(err, ErrRepositoryNotFound) {
		t.Fatalf("branch fetch from a removed source: %v, want ErrRepositoryNotFound", err)
	}
}

func TestIncrementalFetch(t *testing.T) {
	f := newFixture(t)
	srv := newHTTPGit(t, f.root)
	for _, kind := range []string{"path", "http"} {
		t.Run(kind, func(t *testing.T) {
			url := urlsFor(t, f, srv)[kind]
			cacheDir := t.TempDir()
			fetcher := NewFetcher(Options{CacheDir: cacheDir})
			src := Source{URL: url, Ref: Ref{Branch: "trunk"}}

			first, err := fetcher.Fetch(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			root := cacheRoot(t, cacheDir)
			objectsBefore, err := os.Stat(filepath.Join(root, "repo", "objects"))
			if err != nil {
				t.Fatal(err)
			}
			packsBefore := packs(t, root)
			if len(packsBefore) != 1 {
				t.Fatalf("clone wrote %d packs, want 1: %v", len(packsBefore), packsBefore)
			}

			// Fetching again without changes adds nothing and reuses the tree.
			same, err := fetcher.Fetch(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			if same != first {
				t.Fatalf("unchanged source: got %+v, want %+v", same, first)
			}
			if got := packs(t, root); len(got) != 1 {
				t.Fatalf("up-to-date fetch wrote a pack: %v", got)
			}

			content := "trunk-" + kind + "-incremental"
			want := f.commit(t, content)
			second, err := fetcher.Fetch(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			if second.Commit != want || second.Revision != "trunk@sha1:"+want {
				t.Fatalf("after commit: got %s, want %s", second.Revision, want)
			}
			assertTree(t, second, content)
			assertTree(t, first, "trunk-2") // previous artifact kept
			if second.Dir == first.Dir {
				t.Fatal("new revision reused the old directory")
			}

			// Not a re-clone: same object store, the clone's pack is still
			// there, and exactly one new pack holding only the new commit,
			// its two trees and one blob.
			objectsAfter, err := os.Stat(filepath.Join(root, "repo", "objects"))
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(objectsBefore, objectsAfter) {
				t.Fatal("objects directory was replaced: the clone was redone")
			}
			packsAfter := packs(t, root)
			var added []string
			for name := range packsAfter {
				if _, ok := packsBefore[name]; !ok {
					added = append(added, name)
				}
			}
			for name := range packsBefore {
				if _, ok := packsAfter[name]; !ok {
					t.Fatalf("clone pack %s disappeared: %v", name, packsAfter)
				}
			}
			if len(added) != 1 || packsAfter[added[0]] != 4 {
				t.Fatalf("want one new pack with 4 objects, have %v (before %v)", packsAfter, packsBefore)
			}
			// Restore trunk for the next transport.
			runGit(t, f.dir, "reset", "-q", "--hard", f.c2)
		})
	}
}

// TestRewrittenHistory: the branch is reset to an older commit and the
// commits the cache knows are garbage-collected from the source. The next
// fetch must still work (the cache's "haves" are unknown to the source).
func TestRewrittenHistory(t *testing.T) {
	for _, kind := range []string{"path", "http"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			srv := newHTTPGit(t, f.root)
			fetcher := NewFetcher(Options{CacheDir: t.TempDir()})
			src := Source{URL: urlsFor(t, f, srv)[kind]}
			old, err := fetcher.Fetch(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			runGit(t, f.dir, "reset", "-q", "--hard", f.c1)
			runGit(t, f.dir, "tag", "-d", "light")
			runGit(t, f.dir, "branch", "-D", "dev")
			runGit(t, f.dir, "reflog", "expire", "--expire=now", "--all")
			runGit(t, f.dir, "gc", "-q", "--prune=now")
			if out := runGit(t, f.dir, "cat-file", "-t", f.c1); out != "commit" {
				t.Fatalf("fixture broken: %s", out)
			}
			cmd := exec.Command("git", "cat-file", "-e", f.c2)
			cmd.Dir = f.dir
			if cmd.Run() == nil {
				t.Fatal("fixture broken: old commit still in the source")
			}
			want := f.commit(t, "rewritten")
			a, err := fetcher.Fetch(t.Context(), src)
			if err != nil {
				t.Fatalf("Fetch after history rewrite: %v", err)
			}
			if a.Commit != want {
				t.Fatalf("got %s, want %s", a.Commit, want)
			}
			assertTree(t, a, "rewritten")
			assertTree(t, old, "trunk-2")
		})
	}
}

// TestUnreadableCacheIsReplaced: a cached clone that go-git cannot open is
// replaced by a fresh clone instead of failing forever.
func TestUnreadableCacheIsReplaced(t *testing.T) {
	f := newFixture(t)
	cacheDir := t.TempDir()
	fetcher := NewFetcher(Options{CacheDir: cacheDir})
	if _, err := fetcher.Fetch(t.Context(), Source{URL: f.dir}); err != nil {
		t.Fatal(err)
	}
	root := cacheRoot(t, cacheDir)
	writeSrc(t, root, "repo/config", "[[[ not a git config", 0o644)
	a, err := fetcher.Fetch(t.Context(), Source{URL: f.dir, Ref: Ref{Branch: "dev"}})
	if err != nil {
		t.Fatalf("Fetch with a corrupt cache: %v", err)
	}
	assertTree(t, a, "dev-1")
	if b, err := os.ReadFile(filepath.Join(root, "repo", "config")); err != nil || strings.Contains(string(b), "[[[") {
		t.Fatalf("corrupt config was kept: %q %v", b, err)
	}
}

func TestPruneKeepsRecentWorktrees(t *testing.T) {
	f := newFixture(t)
	cacheDir := t.TempDir()
	fetcher := NewFetcher(Options{CacheDir: cacheDir})
	var arts []Artifact
	for i := range 5 {
		f.commit(t, "rev-"+string(rune('a'+i)))
		a, err := fetcher.Fetch(t.Context(), Source{URL: f.dir})
		if err != nil {
			t.Fatal(err)
		}
		arts = append(arts, a)
	}
	entries, err := os.ReadDir(filepath.Join(cacheRoot(t, cacheDir), "worktrees"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	for _, a := range arts[len(arts)-keepWorktrees:] {
		want = append(want, a.Commit)
		assertTree(t, a, "rev-"+string(rune('a'+len(want)+1)))
	}
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("worktrees = %v, want the last %d: %v", got, keepWorktrees, want)
	}
}

func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions()
	if !strings.HasSuffix(o.CacheDir, filepath.Join("converge", "git")) || o.Timeout != DefaultTimeout {
		t.Fatalf("DefaultOptions() = %+v", o)
	}
	if base, err := os.UserCacheDir(); err == nil && !strings.HasPrefix(o.CacheDir, base) {
		t.Fatalf("CacheDir %s is not under the user cache dir %s", o.CacheDir, base)
	}
	if got := NewFetcher(Options{}).opts; got != o {
		t.Fatalf("NewFetcher(Options{}) uses %+v, want %+v", got, o)
	}
}
