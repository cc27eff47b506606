package gitops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	// Zero or negative means DefaultTimeout.
	Timeout time.Duration
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
// Errors are *FetchError values naming the URL and ref, wrapping
// ErrInvalidURL, ErrUnsupportedScheme, ErrInvalidRef, ErrUnreachable,
// ErrRepositoryNotFound or ErrRefNotFound where they apply (other causes,
// such as disk errors or a cancelled ctx, are wrapped as they are). A failed
// Fetch leaves the cached clone and all earlier Artifacts' directories intact.
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
	sum := sha256.Sum256([]byte(ep.key))
	root := filepath.Join(f.opts.CacheDir, hex.EncodeToString(sum[:16]))

	unlock, err := lock(ctx, root)
	if err != nil {
		return Artifact{}, err
	}
	defer unlock()

	c := &cache{root: root, ep: ep, timeout: f.opts.Timeout}
	res, err := c.sync(ctx, src.Ref)
	if err != nil {
		return Artifact{}, err
	}
	dir, err := c.checkout(ctx, res.commit)
	if err != nil {
		return Artifact{}, err
	}
	c.prune(dir)

	a := Artifact{URL: src.URL, Ref: res.ref, Commit: res.commit.String(), Dir: dir}
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
