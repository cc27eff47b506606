package source

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// cache is the cache directory of one URL (see the package doc). Its
// methods must be called with the URL's lock held.
type cache struct {
	root    string
	ep      endpoint
	timeout time.Duration
	shallow bool // depth-1 fetches of branch and tag refs

	// Passed to every go-git network operation.
	auth     transport.AuthMethod
	caBundle []byte
	proxy    transport.ProxyOptions
}

// newCache returns the cache of ep below cacheDir. The directory name is
// derived from the normalised URL, the owner (Source.Owner) and, when auth
// is set, a digest of the credentials, so sources of different owners or
// with different credentials never share a clone.
func newCache(cacheDir string, ep endpoint, owner string, auth *Auth, timeout time.Duration, shallow bool) (*cache, error) {
	key := ep.key
	if owner != "" {
		key += "\x00owner=" + owner
	}
	if fp := auth.fingerprint(); fp != "" {
		key += "\x00" + fp
	}
	sum := sha256.Sum256([]byte(key))
	c := &cache{
		root:    filepath.Join(cacheDir, hex.EncodeToString(sum[:16])),
		ep:      ep,
		timeout: timeout,
		shallow: shallow && ep.kind != kindLocal,
	}
	if auth == nil {
		return c, nil
	}
	switch ep.kind {
	case kindHTTP:
		c.caBundle = auth.CAPEM
		switch {
		case auth.BearerToken != "":
			c.auth = &githttp.TokenAuth{Token: auth.BearerToken}
		case auth.Username != "":
			c.auth = &githttp.BasicAuth{Username: auth.Username, Password: auth.Password}
		}
	case kindSSH:
		a, err := newSSHAuth(auth, ep, timeout)
		if err != nil {
			return nil, err
		}
		c.auth = a
		c.proxy = transport.ProxyOptions{URL: deadlineProxyURL(timeout)}
	}
	return c, nil
}

// resolved is the outcome of syncing a ref into the cached clone.
type resolved struct {
	ref    string // full ref name, or the commit for a commit ref
	short  string // branch or tag short name; empty for a commit ref
	commit plumbing.Hash
	tag    plumbing.Hash // what the tag ref points to (a tag object or, for a lightweight tag, the commit); zero for other refs
}

func (c *cache) repoDir() string { return filepath.Join(c.root, "repo") }

// sync brings ref up to date in the cached clone, cloning first when there is
// no clone or the cached one cannot be opened, and compacts the clone's
// packs when a fetch brought it past MaxPacks.
func (c *cache) sync(ctx context.Context, ref Ref) (resolved, error) {
	repo, err := git.PlainOpen(c.repoDir())
	if err == nil {
		res, err := c.update(ctx, repo, ref)
		if err != nil {
			return res, err
		}
		if err := compact(repo); err != nil {
			return res, fmt.Errorf("cached clone: %w", err)
		}
		return res, nil
	}
	// No clone yet (git.ErrRepositoryNotExists) or an unreadable one: clone
	// afresh; an unreadable clone is replaced only once the new one works.
	return c.clone(ctx, ref)
}

// clone builds a new clone holding ref in a temporary directory and moves it
// to repo/ only when that succeeded, so a failed clone leaves nothing behind.
func (c *cache) clone(ctx context.Context, ref Ref) (resolved, error) {
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		return resolved{}, fmt.Errorf("create cache directory: %w", err)
	}
	tmp, err := os.MkdirTemp(c.root, ".repo.tmp-")
	if err != nil {
		return resolved{}, fmt.Errorf("create cache directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	repo, err := git.PlainInit(tmp, true)
	if err != nil {
		return resolved{}, fmt.Errorf("initialise clone: %w", err)
	}
	res, err := c.update(ctx, repo, ref)
	if err != nil {
		return resolved{}, err
	}
	if err := os.RemoveAll(c.repoDir()); err != nil {
		return resolved{}, fmt.Errorf("replace cached clone: %w", err)
	}
	if err := os.Rename(tmp, c.repoDir()); err != nil {
		return resolved{}, fmt.Errorf("move new clone into place: %w", err)
	}
	_ = os.WriteFile(filepath.Join(c.root, "url"), []byte(c.ep.display+"\n"), 0o644)
	return res, nil
}

// update fetches ref from the remote into repo and resolves it to a commit.
func (c *cache) update(ctx context.Context, repo *git.Repository, ref Ref) (resolved, error) {
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{c.ep.transport}})

	if ref.Commit != "" {
		h := plumbing.NewHash(ref.Commit)
		if _, err := repo.CommitObject(h); err == nil {
			return resolved{ref: ref.Commit, commit: h}, nil // commits are immutable
		}
		// A shallow clone is deepened to the full history: a server only
		// serves commits it advertises, so an older commit comes with the
		// history of a branch or tag.
		depth := 0
		if shallows, _ := repo.Storer.Shallow(); len(shallows) > 0 {
			depth = infiniteDepth
		}
		err := c.fetch(ctx, remote, depth, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")
		if err != nil {
			return resolved{}, err
		}
		if depth != 0 {
			if err := dropCompleteShallows(repo); err != nil {
				return resolved{}, fmt.Errorf("update shallow list: %w", err)
			}
		}
		if _, err := repo.CommitObject(h); err != nil {
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				return resolved{}, fmt.Errorf("%w: commit %s is not reachable from any branch or tag", ErrRefNotFound, ref.Commit)
			}
			return resolved{}, fmt.Errorf("read commit %s: %w", ref.Commit, err)
		}
		return resolved{ref: ref.Commit, commit: h}, nil
	}

	// A branch or tag is fetched by name: the fetch's own ref
	// advertisement resolves it, one round trip (and, over git
	// http-backend, one git process) fewer than listing first. A semver
	// range or the remote's default branch needs the list.
	var name plumbing.ReferenceName
	switch {
	case ref.Branch != "":
		name = plumbing.NewBranchReferenceName(ref.Branch)
	case ref.Tag != "":
		name = plumbing.NewTagReferenceName(ref.Tag)
	default:
		var err error
		if name, err = c.remoteRef(ctx, remote, ref); err != nil {
			return resolved{}, err
		}
	}
	local := plumbing.ReferenceName("refs/remotes/origin/" + name.Short())
	if name.IsTag() {
		local = name
	}
	depth := 0
	if c.shallow {
		depth = 1
	}
	if err := c.fetch(ctx, remote, depth, fmt.Sprintf("+%s:%s", name, local)); err != nil {
		if errors.Is(err, ErrRefNotFound) {
			return resolved{}, fmt.Errorf("%w: %s does not exist", ErrRefNotFound, ref)
		}
		return resolved{}, err
	}
	got, err := repo.Reference(local, false)
	if err != nil {
		return resolved{}, fmt.Errorf("read fetched ref %s: %w", local, err)
	}
	commit, err := peel(repo, got.Hash())
	if err != nil {
		return resolved{}, fmt.Errorf("resolve %s: %w", name, err)
	}
	res := resolved{ref: name.String(), short: name.Short(), commit: commit}
	if name.IsTag() {
		res.tag = got.Hash()
	}
	return res, nil
}

// remoteRef lists the remote's refs and returns the full name of the tag
// ref's SemVer range selects, or else of the remote's default branch, or
// an error wrapping ErrRefNotFound when there is none. Branch and tag refs
// are fetched by name without it (update).
func (c *cache) remoteRef(ctx context.Context, remote *git.Remote, ref Ref) (plumbing.ReferenceName, error) {
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	list, err := remote.ListContext(lctx, &git.ListOptions{
		PeelingOption: git.IgnorePeeled,
		Auth:          c.auth,
		CABundle:      c.caBundle,
		ProxyOptions:  c.proxy,
	})
	if err != nil {
		return "", classifyTransport(c.op(ctx, lctx, "list remote refs"), err)
	}
	refs := make(map[plumbing.ReferenceName]*plumbing.Reference, len(list))
	for _, r := range list {
		refs[r.Name()] = r
	}
	if ref.SemVer != "" {
		return highestTag(refs, ref.SemVer)
	}
	return defaultBranch(refs)
}

// defaultBranch returns the branch the remote's HEAD points to. When the
// remote does not say (no symref), it picks a branch at HEAD's commit,
// preferring main and master.
func defaultBranch(refs map[plumbing.ReferenceName]*plumbing.Reference) (plumbing.ReferenceName, error) {
	head, ok := refs[plumbing.HEAD]
	if !ok {
		return "", fmt.Errorf("%w: the remote has no HEAD", ErrRefNotFound)
	}
	if head.Type() == plumbing.SymbolicReference {
		if t := head.Target(); t.IsBranch() {
			if _, ok := refs[t]; ok {
				return t, nil
			}
			return "", fmt.Errorf("%w: the remote HEAD points to %s, which does not exist", ErrRefNotFound, t)
		}
		return "", fmt.Errorf("%w: the remote HEAD points to %s, which is not a branch", ErrRefNotFound, head.Target())
	}
	var names []plumbing.ReferenceName
	for n, r := range refs {
		if n.IsBranch() && r.Type() == plumbing.HashReference && r.Hash() == head.Hash() {
			names = append(names, n)
		}
	}
	rank := func(n plumbing.ReferenceName) int {
		switch n.Short() {
		case "main":
			return 0
		case "master":
			return 1
		}
		return 2
	}
	slices.SortFunc(names, func(a, b plumbing.ReferenceName) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.String(), b.String()))
	})
	if len(names) == 0 {
		return "", fmt.Errorf("%w: the remote HEAD is detached at %s and names no branch", ErrRefNotFound, head.Hash())
	}
	return names[0], nil
}

// infiniteDepth is the depth git uses for --unshallow.
const infiniteDepth = 1<<31 - 1

// fetch downloads the objects of specs from remote, with c.timeout; depth 0
// means the full history.
func (c *cache) fetch(ctx context.Context, remote *git.Remote, depth int, specs ...string) error {
	fctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	refSpecs := make([]config.RefSpec, len(specs))
	for i, s := range specs {
		refSpecs[i] = config.RefSpec(s)
	}
	err := remote.FetchContext(fctx, &git.FetchOptions{
		RefSpecs:     refSpecs,
		Tags:         git.NoTags,
		Depth:        depth,
		Auth:         c.auth,
		CABundle:     c.caBundle,
		ProxyOptions: c.proxy,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.Is(err, git.NoMatchingRefSpecError{}):
		// The remote does not advertise the ref (any more).
		return fmt.Errorf("fetch: %w: %w", ErrRefNotFound, err)
	}
	return classifyTransport(c.op(ctx, fctx, "fetch"), err)
}

// op names a network operation for an error message, noting when it ran
// into Options.Timeout (rather than the caller's deadline).
func (c *cache) op(parent, ctx context.Context, name string) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		return fmt.Sprintf("%s (timed out after %s)", name, c.timeout)
	}
	return name
}

// dropCompleteShallows removes from the clone's shallow list the commits
// whose parents are all present after a deepening fetch (go-git adds new
// shallow commits but does not act on the server's "unshallow" lines).
func dropCompleteShallows(repo *git.Repository) error {
	shallows, err := repo.Storer.Shallow()
	if err != nil || len(shallows) == 0 {
		return err
	}
	keep := shallows[:0:0]
	for _, h := range shallows {
		cm, err := repo.CommitObject(h)
		if err != nil {
			keep = append(keep, h)
			continue
		}
		for _, p := range cm.ParentHashes {
			if _, err := repo.CommitObject(p); err != nil {
				keep = append(keep, h)
				break
			}
		}
	}
	return repo.Storer.SetShallow(keep)
}

// peel follows annotated tags from h to the commit they point to.
func peel(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		tag, err := repo.TagObject(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			break // not a tag object
		}
		if err != nil {
			return h, err
		}
		if tag.TargetType != plumbing.CommitObject && tag.TargetType != plumbing.TagObject {
			return h, fmt.Errorf("%w: tag %s points to a %s, not a commit", ErrRefNotFound, tag.Name, tag.TargetType)
		}
		h = tag.Target
	}
	if _, err := repo.CommitObject(h); err != nil {
		return h, fmt.Errorf("object %s is not a commit: %w", h, err)
	}
	return h, nil
}
