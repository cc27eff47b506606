package gitserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Env is the hermetic environment every git command runs with: no system or
// global configuration, a fixed author and committer.
var Env = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
	"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
}

// Git runs the git CLI in dir with Env and returns its trimmed stdout; it
// fails the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), Env...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), err, out, msg)
	}
	return strings.TrimSpace(string(out))
}

// Repo is a non-bare repository below a server root.
type Repo struct {
	// Dir is the work tree.
	Dir string
	// Name is the path below the root ("<name>"), the URL path the server
	// serves it at.
	Name string
}

// NewRepo creates root/name as a repository whose default branch is
// branch.
func NewRepo(t testing.TB, root, name, branch string) *Repo {
	t.Helper()
	dir := filepath.Join(root, name)
	Git(t, root, "init", "-q", "-b", branch, dir)
	// Serve pushes to the checked-out branch too (tests push from clones).
	Git(t, dir, "config", "receive.denyCurrentBranch", "updateInstead")
	return &Repo{Dir: dir, Name: name}
}

// Commit writes files (path relative to the work tree → content; an empty
// content deletes the file), commits everything with message msg and
// returns the commit's SHA-1. Extra args go to `git commit` (e.g. "-S").
func (r *Repo) Commit(t testing.TB, msg string, files map[string]string, args ...string) string {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(r.Dir, rel)
		if content == "" {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, r.Dir, "add", "-A")
	Git(t, r.Dir, append([]string{"commit", "-q", "--allow-empty", "-m", msg}, args...)...)
	return Git(t, r.Dir, "rev-parse", "HEAD")
}

// CopyDir copies the regular files below src into dir/rel, for putting an
// example config into a repository.
func (r *Repo) CopyDir(t testing.TB, src, rel string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sub, _ := filepath.Rel(src, p)
		dst := filepath.Join(r.Dir, rel, sub)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
