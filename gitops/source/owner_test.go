package source

import (
	"os"
	"testing"
)

// TestOwnersNeverShareAClone: two owners of the same URL and credentials
// get a clone each, and one owner's fetches reuse its own.
func TestOwnersNeverShareAClone(t *testing.T) {
	f := newFixture(t)
	cacheDir := t.TempDir()
	fetcher := NewFetcher(Options{CacheDir: cacheDir})
	dirs := map[string]string{}
	for _, owner := range []string{"team-a/virt", "team-b/virt", "team-a/virt"} {
		a, err := fetcher.Fetch(t.Context(), Source{URL: f.dir, Owner: owner})
		if err != nil {
			t.Fatalf("Fetch for %s: %v", owner, err)
		}
		if prev, ok := dirs[owner]; ok && prev != a.Dir {
			t.Errorf("owner %s: second fetch checked out into %s, first into %s", owner, a.Dir, prev)
		}
		dirs[owner] = a.Dir
	}
	if dirs["team-a/virt"] == dirs["team-b/virt"] {
		t.Fatalf("owners team-a/virt and team-b/virt share the checkout %s", dirs["team-a/virt"])
	}
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("cache holds %d per-source directories, want 2 (one per owner)", len(entries))
	}
}

func TestIsLocal(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"/srv/git/virt", true},
		{"relative/dir", true},
		{"file:///srv/git/virt", true},
		{"file://localhost/srv/git/virt", true},
		{"FILE:///srv/git/virt", true},
		{"https://git.example.com/virt.git", false},
		{"http://127.0.0.1:8080/virt.git", false},
		{"ssh://git@git.example.com/virt.git", false},
		{"git@git.example.com:platform/virt.git", false},
		{"file://remote.example.com/srv/git", false}, // refused by parseURL, so not a local Source
		{"git://git.example.com/virt.git", false},
		{"", false},
	} {
		if got := IsLocal(tc.url); got != tc.want {
			t.Errorf("IsLocal(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}
