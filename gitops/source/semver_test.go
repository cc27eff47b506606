package source

import (
	"errors"
	"strings"
	"testing"

	"github.com/converge-dev/converge/internal/testing/gitserver"
)

func TestSemVer(t *testing.T) {
	root := t.TempDir()
	repo := gitserver.NewRepo(t, root, "cfg", "main")
	commits := map[string]string{}
	// Annotated and lightweight tags, with and without "v", a pre-release
	// and a tag that is not a version.
	for i, tag := range []string{"v1.0.0", "v1.2.0", "1.2.5", "v1.10.0", "v2.0.0", "v2.1.0-rc.1", "latest"} {
		commits[tag] = repo.Commit(t, tag, map[string]string{"version": tag + "\n"})
		if i%2 == 0 {
			gitserver.Git(t, repo.Dir, "tag", "-a", "-m", tag, tag)
		} else {
			gitserver.Git(t, repo.Dir, "tag", tag)
		}
	}
	srv := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{})
	cases := []struct {
		rng, want string
		err       error
	}{
		{"^1.2", "v1.10.0", nil},
		{">=1.0.0 <1.3.0", "1.2.5", nil},
		{"~1.2", "1.2.5", nil},
		{"1.0.x", "v1.0.0", nil},
		{"*", "v2.0.0", nil}, // pre-releases only when the range asks for them
		{">=2.1.0-rc.0", "v2.1.0-rc.1", nil},
		{"^3", "", ErrRefNotFound},
		{"not a range", "", ErrInvalidRef},
	}
	for kind, url := range map[string]string{"path": repo.Dir, "http": srv.RepoURL(repo)} {
		fetcher := NewFetcher(Options{CacheDir: t.TempDir()})
		for _, tc := range cases {
			t.Run(kind+"/"+tc.rng, func(t *testing.T) {
				a, err := fetcher.Fetch(t.Context(), Source{URL: url, Ref: Ref{SemVer: tc.rng}})
				if tc.err != nil {
					if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.rng) {
						t.Fatalf("error %v, want %v naming %q", err, tc.err, tc.rng)
					}
					t.Logf("error: %v", err)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				want := commits[tc.want]
				if a.Commit != want || a.Ref != "refs/tags/"+tc.want || a.Revision != tc.want+"@sha1:"+want {
					t.Fatalf("got %+v, want tag %s at %s", a, tc.want, want)
				}
				if got := readFile(t, a, "version"); got != tc.want+"\n" {
					t.Fatalf("version file %q, want %q", got, tc.want)
				}
			})
		}
	}
}
