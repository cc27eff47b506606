package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

func TestFetchErrors(t *testing.T) {
	f := newFixture(t)
	srv := newHTTPGit(t, f.root)
	missing := strings.Repeat("ab", 20)
	closed := closedPortURL(t)
	hanging := hangingServer(t)

	cases := []fetchErrCase{
		{"ssh without auth", Source{URL: "ssh://git@example.com/repo.git"}, 0, ErrAuthentication,
			[]string{"authentication failed", "Identity", "KnownHosts", "ssh://git@example.com/repo.git"}},
		{"scp-like without auth", Source{URL: "git@example.com:org/repo.git"}, 0, ErrAuthentication,
			[]string{"authentication failed", "git@example.com:org/repo.git"}},
		{"git scheme", Source{URL: "git://example.com/repo"}, 0, ErrUnsupportedScheme,
			[]string{"unsupported URL scheme", `"git"`}},
		{"unparsable", Source{URL: "http://[::1/repo"}, 0, ErrInvalidURL,
			[]string{"invalid URL", "http://[::1/repo"}},
		{"empty", Source{URL: ""}, 0, ErrInvalidURL, []string{"invalid URL", "empty"}},
		{"http without host", Source{URL: "http:///repo"}, 0, ErrInvalidURL, []string{"no host"}},
		{"file with remote host", Source{URL: "file://otherhost/repo"}, 0, ErrInvalidURL, []string{"otherhost"}},
		{"unreachable", Source{URL: closed, Ref: Ref{Branch: "trunk"}}, 0, ErrUnreachable,
			[]string{"repository unreachable", closed, `branch "trunk"`}},
		{"password redacted", Source{URL: strings.Replace(closed, "http://", "http://user:hunter2@", 1)}, 0, ErrUnreachable,
			[]string{"user:xxxxx@"}},
		{"timeout", Source{URL: hanging}, 300 * time.Millisecond, context.DeadlineExceeded,
			[]string{"repository unreachable", "timed out after 300ms", hanging}},
		{"no repository (path)", Source{URL: filepath.Join(f.root, "nope")}, 0, ErrRepositoryNotFound,
			[]string{"repository not found", filepath.Join(f.root, "nope")}},
		{"no repository (http)", Source{URL: srv.URL + "/nope"}, 0, ErrRepositoryNotFound,
			[]string{"repository not found", srv.URL + "/nope"}},
		{"invalid commit", Source{URL: f.dir, Ref: Ref{Commit: "abc123"}}, 0, ErrInvalidRef,
			[]string{"invalid ref", "abc123"}},
		{"two refs", Source{URL: f.dir, Ref: Ref{Branch: "trunk", Tag: "v1"}}, 0, ErrInvalidRef,
			[]string{"only one"}},
		{"full ref name as branch", Source{URL: f.dir, Ref: Ref{Branch: "refs/heads/trunk"}}, 0, ErrInvalidRef,
			[]string{"refs/heads/trunk"}},
	}
	for kind, url := range urlsFor(t, f, srv) {
		cases = append(cases,
			fetchErrCase{"missing branch " + kind, Source{URL: url, Ref: Ref{Branch: "nope"}}, 0, ErrRefNotFound,
				[]string{"ref not found", `branch "nope"`, url}},
			fetchErrCase{"missing tag " + kind, Source{URL: url, Ref: Ref{Tag: "v9"}}, 0, ErrRefNotFound,
				[]string{"ref not found", `tag "v9"`, url}},
			fetchErrCase{"missing commit " + kind, Source{URL: url, Ref: Ref{Commit: missing}}, 0, ErrRefNotFound,
				[]string{"ref not found", "commit " + missing, url}},
		)
	}

	// One cache for every case, so failures hit the clones made by the good
	// fetches; after each failure the good artifacts must be intact.
	cacheDir := t.TempDir()
	good := map[string]Artifact{}
	for kind, url := range urlsFor(t, f, srv) {
		a, err := NewFetcher(Options{CacheDir: cacheDir}).Fetch(t.Context(), Source{URL: url, Ref: Ref{Tag: "v1"}})
		if err != nil {
			t.Fatalf("good fetch over %s: %v", kind, err)
		}
		good[kind] = a
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fetcher := NewFetcher(Options{CacheDir: cacheDir, Timeout: tc.timeout})
			start := time.Now()
			a, err := fetcher.Fetch(t.Context(), tc.src)
			if err == nil {
				t.Fatalf("Fetch succeeded: %+v", a)
			}
			if tc.timeout > 0 && time.Since(start) > 10*tc.timeout {
				t.Errorf("Fetch took %v with Timeout %v", time.Since(start), tc.timeout)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %q does not wrap %q", err, tc.want)
			}
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Ref != tc.src.Ref {
				t.Errorf("error %q is not a *FetchError for ref %v", err, tc.src.Ref)
			}
			for _, s := range tc.substr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q leaks the password", err)
			}
			if a != (Artifact{}) {
				t.Errorf("failed Fetch returned a non-zero Artifact %+v", a)
			}
			for _, g := range good {
				assertTree(t, g, "trunk-1")
			}
		})
	}
	// The cached clones still work.
	for kind, url := range urlsFor(t, f, srv) {
		a, err := NewFetcher(Options{CacheDir: cacheDir}).Fetch(t.Context(), Source{URL: url, Ref: Ref{Tag: "v1"}})
		if err != nil || a != good[kind] {
			t.Fatalf("fetch over %s after the failures: %+v, %v; want %+v", kind, a, err, good[kind])
		}
	}
}

// TestFailedFetchKeepsCache breaks the server while the source has a new
// commit: the failed fetch must leave the clone, its refs and the last good
// work tree as they were, and the next fetch must work incrementally.
func TestFailedFetchKeepsCache(t *testing.T) {
	for _, mode := range []string{"all", "pack"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			srv := newHTTPGit(t, f.root)
			cacheDir := t.TempDir()
			fetcher := NewFetcher(Options{CacheDir: cacheDir})
			src := Source{URL: srv.URL + "/src", Ref: Ref{Branch: "trunk"}}
			good, err := fetcher.Fetch(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			root := cacheRoot(t, cacheDir)
			packsBefore := packs(t, root)
			next := f.commit(t, "trunk-next")

			srv.broken.Store(mode)
			_, err = fetcher.Fetch(t.Context(), src)
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), src.URL) {
				t.Fatalf("Fetch from a broken server: %v, want ErrUnreachable naming %s", err, src.URL)
			}
			assertTree(t, good, "trunk-2")
			if got := packs(t, root); len(got) != len(packsBefore) {
				t.Fatalf("failed fetch changed the packs: %v -> %v", packsBefore, got)
			}
			repo, err := git.PlainOpen(filepath.Join(root, "repo"))
			if err != nil {
				t.Fatalf("cached clone unusable: %v", err)
			}
			ref, err := repo.Reference(plumbing.NewRemoteReferenceName("origin", "trunk"), false)
			if err != nil || ref.Hash().String() != good.Commit {
				t.Fatalf("tracking ref after failed fetch: %v %v, want %s", ref, err, good.Commit)
			}
			wts, _ := os.ReadDir(filepath.Join(root, "worktrees"))
			if len(wts) != 1 || wts[0].Name() != good.Commit {
				t.Fatalf("worktrees after failed fetch: %v", wts)
			}

			srv.broken.Store("")
			a, err := fetcher.Fetch(t.Context(), src)
			if err != nil || a.Commit != next {
				t.Fatalf("Fetch after repair: %+v %v, want %s", a, err, next)
			}
			assertTree(t, a, "trunk-next")
			if got := packs(t, root); len(got) != len(packsBefore)+1 {
				t.Fatalf("fetch after repair did not add exactly one pack: %v -> %v", packsBefore, got)
			}
		})
	}
}

// TestFetchCanceled: a cancelled context stops Fetch and is reported as such.
func TestFetchCanceled(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := NewFetcher(Options{CacheDir: t.TempDir()}).Fetch(ctx, Source{URL: f.dir})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch with a cancelled context: %v", err)
	}
}

func TestArtifactPath(t *testing.T) {
	f := newFixture(t)
	a, err := NewFetcher(Options{CacheDir: t.TempDir()}).Fetch(t.Context(), Source{URL: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rel    string
		want   string // path relative to Dir when err is nil
		err    error
		substr string
	}{
		{rel: "config/hco.yaml", want: "config/hco.yaml"},
		{rel: "config", want: "config"},
		{rel: "", want: "."},
		{rel: ".", want: "."},
		{rel: "./config/../config/hco.yaml", want: "config/hco.yaml"},
		{rel: "inside/hco.yaml", want: "inside/hco.yaml"},
		{rel: "missing.yaml", err: ErrPathNotFound, substr: `"missing.yaml"`},
		{rel: "config/missing/x", err: ErrPathNotFound, substr: "path not found"},
		{rel: "..", err: ErrPathEscapes, substr: `".."`},
		{rel: "../" + a.Commit + "/config", err: ErrPathEscapes, substr: "path escapes the artifact"},
		{rel: "config/../../x", err: ErrPathEscapes, substr: `"config/../../x"`},
		{rel: "/etc/passwd", err: ErrPathEscapes, substr: "absolute path"},
		{rel: filepath.Join(a.Dir, "config"), err: ErrPathEscapes, substr: "absolute path"},
		{rel: "up", err: ErrPathEscapes, substr: "symbolic link"},
		{rel: "up/" + a.Commit + "/config", want: "up/" + a.Commit + "/config"}, // leaves and re-enters
		{rel: "up/" + a.Commit + "/../other", err: ErrPathNotFound, substr: "path not found"},
		{rel: "abs", err: ErrPathEscapes, substr: "symbolic link"},
		{rel: "abs/etc", err: ErrPathEscapes, substr: "symbolic link"},
	}
	for _, tc := range cases {
		t.Run(tc.rel, func(t *testing.T) {
			p, err := a.Path(tc.rel)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.substr) {
					t.Fatalf("Path(%q) = %q, %v; want error %v mentioning %q", tc.rel, p, err, tc.err, tc.substr)
				}
				if !strings.Contains(err.Error(), a.Revision) {
					t.Errorf("error %q does not name the revision", err)
				}
				return
			}
			if err != nil || p != filepath.Join(a.Dir, tc.want) {
				t.Fatalf("Path(%q) = %q, %v; want %q", tc.rel, p, err, filepath.Join(a.Dir, tc.want))
			}
			if _, err := os.Stat(p); err != nil {
				t.Fatal(err)
			}
		})
	}
	assertTree(t, a, "trunk-2")
}

func TestParseURL(t *testing.T) {
	wd, _ := os.Getwd()
	cases := []struct {
		in, key string
		err     error
	}{
		{in: "/srv/repo", key: "file:///srv/repo"},
		{in: "/srv/repo/", key: "file:///srv/repo"},
		{in: "file:///srv/repo", key: "file:///srv/repo"},
		{in: "file://localhost/srv/repo", key: "file:///srv/repo"},
		{in: "repo", key: "file://" + filepath.Join(wd, "repo")},
		{in: "./sub/../repo", key: "file://" + filepath.Join(wd, "repo")},
		{in: "https://example.com/org/repo.git", key: "https://example.com/org/repo.git"},
		{in: "HTTPS://example.com/org/repo.git#frag", key: "https://example.com/org/repo.git"},
		{in: "ssh://example.com/repo", key: "ssh://example.com/repo"},
		{in: "SSH://git@example.com:2222/org/repo.git#x", key: "ssh://git@example.com:2222/org/repo.git"},
		{in: "git+ssh://git@example.com/repo", key: "ssh://git@example.com/repo"},
		{in: "user@example.com:repo", key: "user@example.com:repo"},
		{in: "ssh://user:pw@example.com/repo", err: ErrInvalidURL},
		{in: "ssh:///repo", err: ErrInvalidURL},
		{in: "s3://bucket/repo", err: ErrUnsupportedScheme},
		{in: " ", err: ErrInvalidURL},
		{in: "https://exa mple.com/", err: ErrInvalidURL},
	}
	for _, tc := range cases {
		ep, err := parseURL(tc.in)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("parseURL(%q) = %+v, %v; want %v", tc.in, ep, err, tc.err)
			}
			continue
		}
		if err != nil || ep.key != tc.key {
			t.Errorf("parseURL(%q) = %q, %v; want %q", tc.in, ep.key, err, tc.key)
		}
	}
}

// fetchErrCase is one failing Fetch: the error it must match with
// errors.Is and the substrings its message must contain.
type fetchErrCase struct {
	name    string
	src     Source
	timeout time.Duration
	want    error
	substr  []string
}
