package source

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/converge-dev/converge/internal/testing/gitserver"
	git "github.com/go-git/go-git/v5"
	"golang.org/x/crypto/ssh"
)

// packStats sums the object counts and sizes of the cached clone's packs.
func packStats(t *testing.T, root string) (objects uint32, bytes int64) {
	t.Helper()
	for name, n := range packs(t, root) {
		fi, err := os.Stat(filepath.Join(root, "repo", "objects", "pack", name))
		if err != nil {
			t.Fatal(err)
		}
		objects += n
		bytes += fi.Size()
	}
	return objects, bytes
}

// noise is n bytes that do not compress, so history has a real size.
func noise(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return string(b)
}

func TestShallowFetch(t *testing.T) {
	root := t.TempDir()
	repo := gitserver.NewRepo(t, root, "cfg", "main")
	r := rand.New(rand.NewPCG(1, 2))
	var history []string
	for i := range 30 {
		history = append(history, repo.Commit(t, fmt.Sprint("c", i), map[string]string{
			"config/hco.yaml":           fmt.Sprintf("rev: %d\n", i),
			fmt.Sprintf("data/%d", i%5): noise(r, 8<<10),
		}))
	}
	key := gitserver.NewSSHKey(t, "")
	sshSrv := gitserver.NewSSH(t, root, gitserver.SSHOptions{AuthorizedKeys: []ssh.PublicKey{key.Public}})
	httpSrv := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{})
	sources := map[string]Source{
		"http": {URL: httpSrv.RepoURL(repo)},
		"ssh":  {URL: sshSrv.RepoURL(repo), Auth: &Auth{Identity: key.PrivatePEM, KnownHosts: sshSrv.KnownHosts}},
	}
	for kind, src := range sources {
		t.Run(kind, func(t *testing.T) {
			src.Ref = Ref{Branch: "main"}
			fullDir, shallowDir := t.TempDir(), t.TempDir()
			if _, err := NewFetcher(Options{CacheDir: fullDir}).Fetch(t.Context(), src); err != nil {
				t.Fatal(err)
			}
			fullObjects, fullBytes := packStats(t, cacheRoot(t, fullDir))

			shallow := NewFetcher(Options{CacheDir: shallowDir, Shallow: true})
			a, err := shallow.Fetch(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			if a.Commit != history[len(history)-1] {
				t.Fatalf("shallow fetch got %s, want %s", a.Commit, history[len(history)-1])
			}
			assertTree(t, a, "rev: 29\n")
			sroot := cacheRoot(t, shallowDir)
			shallowObjects, shallowBytes := packStats(t, sroot)
			t.Logf("clone of 30 commits: full %d objects, %d bytes; shallow %d objects, %d bytes", fullObjects, fullBytes, shallowObjects, shallowBytes)
			if shallowObjects >= fullObjects || shallowBytes*3 > fullBytes {
				t.Fatalf("shallow clone is not smaller: %d objects / %d bytes vs full %d / %d", shallowObjects, shallowBytes, fullObjects, fullBytes)
			}
			if _, err := os.Stat(filepath.Join(sroot, "repo", "shallow")); err != nil {
				t.Fatalf("the shallow clone has no shallow file: %v", err)
			}

			t.Cleanup(func() { gitserver.Git(t, repo.Dir, "reset", "-q", "--hard", history[len(history)-1]) })
			// Incremental: one more commit adds one pack to the same object
			// store, holding at most one tree's objects (go-git's depth-1
			// fetch re-sends the tip's whole tree; git's CLI would send 4
			// objects), never history.
			before := packs(t, sroot)
			next := repo.Commit(t, "next-"+kind, map[string]string{"config/hco.yaml": "rev: next\n"})
			b, err := shallow.Fetch(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			if b.Commit != next {
				t.Fatalf("got %s, want %s", b.Commit, next)
			}
			assertTree(t, b, "rev: next\n")
			after := packs(t, sroot)
			var added []uint32
			for name, n := range after {
				if _, ok := before[name]; !ok {
					added = append(added, n)
				}
			}
			t.Logf("incremental shallow fetch of 1 commit: new packs with %v objects", added)
			if len(added) != 1 || added[0] > shallowObjects || len(after) != len(before)+1 {
				t.Fatalf("incremental fetch: new packs %v, before %v, after %v", added, before, after)
			}

			// An old commit deepens the clone to the full history.
			old, err := shallow.Fetch(t.Context(), Source{URL: src.URL, Auth: src.Auth, Ref: Ref{Commit: history[3]}})
			if err != nil {
				t.Fatalf("old commit from a shallow clone: %v", err)
			}
			assertTree(t, old, "rev: 3\n")
			cloned, err := git.PlainOpen(filepath.Join(sroot, "repo"))
			if err != nil {
				t.Fatal(err)
			}
			if s, err := cloned.Storer.Shallow(); err != nil || len(s) != 0 {
				t.Fatalf("after deepening the clone still lists shallow commits %v (%v)", s, err)
			}
			deepObjects, deepBytes := packStats(t, sroot)
			t.Logf("after deepening: %d objects, %d bytes", deepObjects, deepBytes)

			// Branch fetches keep working on the deepened clone.
			if c, err := shallow.Fetch(t.Context(), src); err != nil || c.Commit != next {
				t.Fatalf("branch after deepening: %+v, %v", c, err)
			}
		})
	}
}
