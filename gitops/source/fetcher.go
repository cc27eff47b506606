package source

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DefaultTimeout is the Options.Timeout used when none is given.
const DefaultTimeout = 60 * time.Second

// Options tunes a Fetcher.
type Options struct {
	// CacheDir holds one directory per URL (see the package doc for the
	// layout). Empty means DefaultOptions().CacheDir. A relative path is
	// made absolute when the Fetcher is created.
	CacheDir string
	// Timeout bounds each network operation of a Fetch (listing the remote's
	// refs, downloading objects); the caller's context still applies.
	// Zero or negative means DefaultTimeout. Source.Timeout overrides it
	// per Source.
	Timeout time.Duration
	// Shallow fetches branch, tag and semver refs of remote (http(s), SSH)
	// repositories with depth 1: only the tip commit and its objects, not
	// its history. Later fetches stay incremental. A commit ref that is not
	// in the shallow clone deepens it to the full history once. Local
	// repositories are always fetched in full (go-git's embedded server
	// has no shallow support).
	Shallow bool
	// MaxCacheBytes, when positive, bounds the size of CacheDir: after each
	// successful Fetch, whole per-URL directories are deleted, least
	// recently used first, until the total is at most MaxCacheBytes. The
	// directory of the URL just fetched and directories that another Fetch
	// of this process is using are never deleted, so the cache can stay
	// above the bound. Zero means no bound.
	MaxCacheBytes int64
}

// DefaultOptions returns CacheDir = os.UserCacheDir()/converge/git (or
// os.TempDir()/converge/git when the user has no cache directory) and
// Timeout = DefaultTimeout (60s).
func DefaultOptions() Options {
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	return Options{
		CacheDir: filepath.Join(base, "converge", "git"),
		Timeout:  DefaultTimeout,
	}
}

// Fetcher fetches Sources into its cache directory. Create it with
// NewFetcher; it is safe for concurrent use.
type Fetcher struct {
	opts Options
}

// NewFetcher returns a Fetcher using opts, with zero fields replaced by the
// values of DefaultOptions(). It does not touch the disk.
func NewFetcher(opts Options) *Fetcher {
	def := DefaultOptions()
	if opts.CacheDir == "" {
		opts.CacheDir = def.CacheDir
	}
	if abs, err := filepath.Abs(opts.CacheDir); err == nil {
		opts.CacheDir = abs
	}
	if opts.Timeout <= 0 {
		opts.Timeout = def.Timeout
	}
	return &Fetcher{opts: opts}
}

// Fetch makes src.Ref of src.URL available as a checked-out directory and
// returns it as an Artifact.
//
// The first call for a URL clones it into the cache; later calls fetch only
// new objects into the cached clone. Then the ref is resolved (branch and tag
// refs are always looked up on the remote; a commit that is already cached is
// used without contacting the remote) and its commit is checked out into its
// own directory, reused if that commit was checked out before.
//
// Calls for the same URL are serialised; calls for different URLs run in
// parallel. ctx cancels the wait for that serialisation and all work; each
// network operation is additionally bounded by Options.Timeout.
//
// With src.Verify set, the signatures are checked after the commit is
// fetched and before it is checked out; an Artifact is returned only when
// they are valid, and Artifact.Verified says what was verified.
//
// Errors are *FetchError values naming the URL and ref, wrapping
// ErrInvalidURL, ErrUnsupportedScheme, ErrInvalidRef, ErrAuthentication,
// ErrUnreachable, ErrRepositoryNotFound, ErrRefNotFound or ErrVerification
// where they apply (other causes, such as disk errors or a cancelled ctx,
// are wrapped as they are). A failed Fetch leaves the cached clone and all
// earlier Artifacts' directories intact.
func (f *Fetcher) Fetch(ctx context.Context, src Source) (Artifact, error) {
	a, err := f.fetch(ctx, src)
	if err != nil {
		return Artifact{}, &FetchError{URL: displayURL(src.URL), Ref: src.Ref, Err: err}
	}
	return a, nil
}

func (f *Fetcher) fetch(ctx context.Context, src Source) (Artifact, error) {
	if err := src.Ref.validate(); err != nil {
		return Artifact{}, err
	}
	ep, err := parseURL(src.URL)
	if err != nil {
		return Artifact{}, err
	}
	if err := src.Auth.validateFor(ep.kind, ep.display); err != nil {
		return Artifact{}, err
	}
	if err := src.Verify.validateFor(src.Ref); err != nil {
		return Artifact{}, err
	}
	timeout := f.opts.Timeout
	if src.Timeout > 0 {
		timeout = src.Timeout
	}
	c, err := newCache(f.opts.CacheDir, ep, src.Owner, src.Auth, timeout, f.opts.Shallow)
	if err != nil {
		return Artifact{}, err
	}

	unlock, err := lock(ctx, c.root)
	if err != nil {
		return Artifact{}, err
	}
	defer unlock()

	res, err := c.sync(ctx, src.Ref)
	if err != nil {
		return Artifact{}, err
	}
	verified, err := c.verify(res, src.Ref, src.Verify)
	if err != nil {
		return Artifact{}, err
	}
	dir, err := c.checkout(ctx, res.commit)
	if err != nil {
		return Artifact{}, err
	}
	c.prune(dir)
	touch(c.root)
	if f.opts.MaxCacheBytes > 0 {
		evict(f.opts.CacheDir, c.root, f.opts.MaxCacheBytes)
	}

	a := Artifact{URL: src.URL, Ref: res.ref, Commit: res.commit.String(), Dir: dir, Verified: verified}
	if res.short != "" {
		a.Revision = res.short + "@sha1:" + a.Commit
	} else {
		a.Revision = "sha1:" + a.Commit
	}
	return a, nil
}

// locks maps a cache root to a one-slot channel used as a mutex that a
// waiter can abandon when its context ends. It is package-level so that
// Fetchers sharing a CacheDir also serialise.
var locks sync.Map // string -> chan struct{}

func lock(ctx context.Context, key string) (unlock func(), err error) {
	v, _ := locks.LoadOrStore(key, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// tryLock takes the lock of key if it is free, without waiting.
func tryLock(key string) (unlock func(), ok bool) {
	v, _ := locks.LoadOrStore(key, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	default:
		return nil, false
	}
}
