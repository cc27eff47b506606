package source

import "testing"

// TestFetchRoundTrips counts the HTTP requests a Fetch into an existing
// clone makes: a branch or tag is resolved by the fetch's own ref
// advertisement (one request when nothing is new, two with a new commit:
// the advertisement and the pack), while the remote's default branch and
// a semver range list the refs first (one request more).
func TestFetchRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ref            Ref
		upToDate, next int64
	}{
		{"branch", Ref{Branch: "trunk"}, 1, 2},
		{"default branch", Ref{}, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			srv := newHTTPGit(t, f.root)
			fetcher := NewFetcher(Options{CacheDir: t.TempDir()})
			src := Source{URL: srv.URL + "/src", Ref: tc.ref}
			if _, err := fetcher.Fetch(t.Context(), src); err != nil {
				t.Fatal(err)
			}
			count := func(what string, want int64) {
				t.Helper()
				before := srv.requests.Load()
				a, err := fetcher.Fetch(t.Context(), src)
				if err != nil {
					t.Fatal(err)
				}
				if got := srv.requests.Load() - before; got != want {
					t.Errorf("%s: %d requests, want %d", what, got, want)
				}
				if head := runGit(t, f.dir, "rev-parse", "HEAD"); a.Commit != head {
					t.Errorf("%s: commit %s, want the branch's %s", what, a.Commit, head)
				}
			}
			count("up to date", tc.upToDate)
			f.commit(t, "trunk-3")
			count("a new commit", tc.next)
		})
	}
}
