package source

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Artifact is one checked-out revision of a Source, as returned by
// Fetcher.Fetch.
type Artifact struct {
	// URL is Source.URL as given.
	URL string
	// Ref is the full ref name that was resolved ("refs/heads/main",
	// "refs/tags/v1"; the default branch is reported as the branch it is), or
	// the commit SHA for a commit ref.
	Ref string
	// Commit is the full 40-hex-digit SHA-1 of the checked-out commit.
	Commit string
	// Revision is the Flux-style revision: "main@sha1:<sha>" for a branch,
	// "v1@sha1:<sha>" for a tag, "sha1:<sha>" for a commit ref.
	Revision string
	// Verified says which signatures were verified when Source.Verify was
	// set, e.g. `commit <sha> by OpenPGP key 1A2B3C4D5E6F7081 (alice.asc)`
	// or `tag "v1.2.0" (<sha>) by SSH key SHA256:… (bob.pub); commit <sha> by
	// …`; empty when nothing was verified.
	Verified string
	// Dir is the absolute path of the work tree root: the files of Commit,
	// without a .git directory. Treat it as read-only.
	Dir string
}

// Path returns the absolute path of rel (slash- or OS-separated, relative to
// Dir) inside the artifact; "" and "." give Dir. It returns an error
// wrapping ErrPathEscapes if rel is absolute, leaves Dir through "..", or
// resolves through a symbolic link to a place outside Dir, and one wrapping
// ErrPathNotFound if nothing exists at rel. The returned path may itself go
// through symbolic links that stay inside Dir.
func (a Artifact) Path(rel string) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("gitops: path %q in %s (%s): %w", rel, a.URL, a.Revision, err)
	}
	if a.Dir == "" {
		return fail(fmt.Errorf("%w: the artifact has no directory", ErrPathNotFound))
	}
	native := filepath.FromSlash(rel)
	if filepath.IsAbs(native) {
		return fail(fmt.Errorf("%w: absolute path", ErrPathEscapes))
	}
	clean := filepath.Clean(native)
	if !filepath.IsLocal(clean) && clean != "." {
		return fail(fmt.Errorf("%w: \"..\" leads outside the work tree", ErrPathEscapes))
	}
	root, err := filepath.EvalSymlinks(a.Dir)
	if err != nil {
		return fail(fmt.Errorf("%w: work tree: %w", ErrPathNotFound, err))
	}
	p := filepath.Join(a.Dir, clean)
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fail(fmt.Errorf("%w: %w", ErrPathNotFound, err))
		}
		return fail(err)
	}
	if r, err := filepath.Rel(root, resolved); err != nil || !filepath.IsLocal(r) && r != "." {
		return fail(fmt.Errorf("%w: symbolic link resolves to %s, outside the work tree", ErrPathEscapes, resolved))
	}
	return p, nil
}
