package source

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// keepWorktrees is how many checked-out revisions per URL survive a prune.
const keepWorktrees = 3

// staleTemp is the age after which an abandoned temporary directory (from a
// crashed process) is removed.
const staleTemp = time.Hour

func (c *cache) worktreesDir() string { return filepath.Join(c.root, "worktrees") }

// checkout returns worktrees/<commit>, writing it first if it does not exist.
// The tree is written to a temporary directory and renamed into place, so
// worktrees/<commit> is either absent or complete.
func (c *cache) checkout(ctx context.Context, commit plumbing.Hash) (string, error) {
	dir := filepath.Join(c.worktreesDir(), commit.String())
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		touch(dir)
		return dir, nil
	}
	repo, err := git.PlainOpen(c.repoDir())
	if err != nil {
		return "", fmt.Errorf("open cached clone: %w", err)
	}
	if err := os.MkdirAll(c.worktreesDir(), 0o755); err != nil {
		return "", fmt.Errorf("create worktrees directory: %w", err)
	}
	tmp, err := os.MkdirTemp(c.worktreesDir(), ".tmp-")
	if err != nil {
		return "", fmt.Errorf("create worktree: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := writeTree(ctx, repo, commit, tmp); err != nil {
		return "", fmt.Errorf("check out %s: %w", commit, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("move worktree of %s into place: %w", commit, err)
	}
	touch(dir)
	return dir, nil
}

// writeTree writes the files of commit into the empty directory dir. All
// writes go through an os.Root, so no tree entry can write outside dir.
// Symbolic links are created last so that no file is written through one.
// Submodules are skipped.
func writeTree(ctx context.Context, repo *git.Repository, commit plumbing.Hash, dir string) error {
	cm, err := repo.CommitObject(commit)
	if err != nil {
		return err
	}
	tree, err := cm.Tree()
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()

	var links []*object.File
	err = tree.Files().ForEach(func(f *object.File) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := filepath.FromSlash(f.Name)
		if !filepath.IsLocal(name) || slices.Contains(strings.Split(f.Name, "/"), ".git") {
			return fmt.Errorf("refusing tree entry %q", f.Name)
		}
		if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		switch f.Mode {
		case filemode.Symlink:
			links = append(links, f)
			return nil
		case filemode.Executable:
			return writeFile(root, name, f, 0o755)
		case filemode.Regular, filemode.Deprecated:
			return writeFile(root, name, f, 0o644)
		default:
			return nil
		}
	})
	if err != nil {
		return err
	}
	for _, l := range links {
		target, err := l.Contents()
		if err != nil {
			return err
		}
		if err := root.Symlink(target, filepath.FromSlash(l.Name)); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(root *os.Root, name string, f *object.File, perm os.FileMode) error {
	r, err := f.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// touch marks dir as used now; prune keeps the most recently used worktrees.
func touch(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// prune deletes all but the keepWorktrees most recently used worktrees
// (never current) and temporary directories older than staleTemp. Errors are
// ignored: a leftover directory only costs disk space.
func (c *cache) prune(current string) {
	removeStale(c.root)
	entries, err := os.ReadDir(c.worktreesDir())
	if err != nil {
		return
	}
	type wt struct {
		path string
		used time.Time
	}
	var wts []wt
	for _, e := range entries {
		p := filepath.Join(c.worktreesDir(), e.Name())
		info, err := e.Info()
		if err != nil {
			continue
		}
		if p != current && e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			wts = append(wts, wt{p, info.ModTime()})
		}
	}
	removeStale(c.worktreesDir())
	slices.SortFunc(wts, func(a, b wt) int { return b.used.Compare(a.used) })
	for i, w := range wts {
		if i >= keepWorktrees-1 {
			_ = os.RemoveAll(w.path)
		}
	}
}

// removeStale deletes temporary ("."-prefixed) entries of dir that are older
// than staleTemp; they are left over from a process that crashed.
func removeStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
