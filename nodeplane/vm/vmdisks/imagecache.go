package vmdisks

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/internal/ociregistry"
	"github.com/converge-dev/converge/nodeplane/containerdisk"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// imageCache is the node's cache of containerDisk disks:
// <dir>/<algorithm>-<hex of the image manifest digest>/disk.<raw|qcow2>
// (with "-p<hash of path>" after the digest for a containerDisk that sets
// path), written once under a lock, through a temporary directory
// renamed into place, and never modified after: overlays only read it.
// <dir>/refs/<hash of the image reference> holds the digest an image
// reference had at its last pull, for the IfNotPresent and Never
// policies.
type imageCache struct {
	dir  string
	opts *Options
}

// pullRequest is one containerDisk to find or pull.
type pullRequest struct {
	image    string
	ref      name.Reference
	path     string // clean and relative; "" for the single file under /disk/
	policy   corev1.PullPolicy
	keychain authn.Keychain
}

// cachedImage is a disk in the cache.
type cachedImage struct {
	path, format, digest string
	pulled               bool // false: served from the cache
}

// get gives req's disk from the cache, pulling it first when the policy
// asks for it or the cache lacks it (and the policy allows it).
func (c *imageCache) get(ctx context.Context, req pullRequest) (cachedImage, error) {
	if req.policy != corev1.PullAlways {
		if dgst, ok := c.lookupRef(req.image); ok {
			if img, ok := c.entry(dgst, req.path); ok {
				return img, nil
			}
		}
		if req.policy == corev1.PullNever {
			return cachedImage{}, fmt.Errorf("image %s is not on this node and its imagePullPolicy is Never", req.image)
		}
	}
	if c.opts.PullTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.PullTimeout)
		defer cancel()
	}
	transport := c.opts.Transport
	img, err := remote.Image(req.ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(req.keychain),
		remote.WithPlatform(c.opts.Platform), remote.WithTransport(ociregistry.Transport(transport, nil)))
	if err != nil {
		return cachedImage{}, fmt.Errorf("image %s: %w", req.image, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return cachedImage{}, fmt.Errorf("image %s: %w", req.image, err)
	}
	got, ok := c.entry(digest.String(), req.path)
	if !ok {
		if got, err = c.fill(ctx, req, img, digest); err != nil {
			return cachedImage{}, fmt.Errorf("image %s (%s): %w", req.image, digest, err)
		}
	}
	if err := c.storeRef(req.image, digest.String()); err != nil {
		return cachedImage{}, fmt.Errorf("image %s: %w", req.image, err)
	}
	return got, nil
}

// key names a cache entry: the digest with "-" for ":", and a hash of
// path when set.
func key(digest, p string) string {
	k := strings.Replace(digest, ":", "-", 1)
	if p != "" {
		k += "-p" + shortHash(p)
	}
	return k
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// entry gives the cached disk of digest and path, if there is one.
func (c *imageCache) entry(digest, p string) (cachedImage, bool) {
	dir := filepath.Join(c.dir, key(digest, p))
	for _, format := range []string{domain.FormatQCOW2, domain.FormatRaw} {
		f := filepath.Join(dir, "disk."+format)
		if _, err := os.Stat(f); err == nil {
			return cachedImage{path: f, format: format, digest: digest}, true
		}
	}
	return cachedImage{}, false
}

func (c *imageCache) refFile(image string) string {
	return filepath.Join(c.dir, "refs", shortHash(image))
}

// lookupRef gives the digest image had at its last pull.
func (c *imageCache) lookupRef(image string) (string, bool) {
	b, err := os.ReadFile(c.refFile(image))
	if err != nil {
		return "", false
	}
	// the file holds "<image>\n<digest>\n": the image guards against a hash clash
	img, dgst, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n")
	return dgst, ok && img == image && dgst != ""
}

func (c *imageCache) storeRef(image, digest string) error {
	f := c.refFile(image)
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return err
	}
	return replaceFile(f, func(tmp string) error {
		return os.WriteFile(tmp, []byte(image+"\n"+digest+"\n"), 0o600)
	})
}

// fill extracts req's disk from img into the cache under a lock on the
// entry (another goroutine or process pulling the same digest waits, then
// finds it there).
func (c *imageCache) fill(ctx context.Context, req pullRequest, img v1.Image, digest v1.Hash) (cachedImage, error) {
	k := key(digest.String(), req.path)
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return cachedImage{}, err
	}
	unlock, err := lockFile(filepath.Join(c.dir, k+".lock"))
	if err != nil {
		return cachedImage{}, err
	}
	defer unlock()
	if got, ok := c.entry(digest.String(), req.path); ok {
		return got, nil // pulled meanwhile
	}
	tmp, err := os.MkdirTemp(c.dir, ".pull-")
	if err != nil {
		return cachedImage{}, err
	}
	defer os.RemoveAll(tmp)
	raw := filepath.Join(tmp, "disk")
	if err := extractDisk(ctx, img, req.path, raw); err != nil {
		return cachedImage{}, err
	}
	format, err := c.format(ctx, raw)
	if err != nil {
		return cachedImage{}, err
	}
	if err := os.Rename(raw, filepath.Join(tmp, "disk."+format)); err != nil {
		return cachedImage{}, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return cachedImage{}, err
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, k)); err != nil {
		return cachedImage{}, err
	}
	got, ok := c.entry(digest.String(), req.path)
	if !ok {
		return cachedImage{}, fmt.Errorf("cache entry %s vanished", k)
	}
	got.pulled = true
	c.opts.Log.Info("containerDisk pulled", "image", req.image, "digest", digest.String(), "format", format, "path", got.path)
	return got, nil
}

// qcow2Magic starts every qcow2 image.
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// format tells qcow2 (by its magic) from raw (anything else), and refuses
// a qcow2 image that refers to other files (a backing file or an external
// data file would read the node's files into the guest).
func (c *imageCache) format(ctx context.Context, p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	head := make([]byte, len(qcow2Magic))
	_, err = io.ReadFull(f, head)
	f.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	if !bytes.Equal(head, qcow2Magic) {
		return domain.FormatRaw, nil
	}
	info, err := qemuInfo(ctx, c.opts.QemuImg, p, domain.FormatQCOW2)
	if err != nil {
		return "", err
	}
	if info.BackingFilename != "" {
		return "", fmt.Errorf("the qcow2 disk has a backing file (%s): expected a self-contained image", info.BackingFilename)
	}
	if info.FormatSpecific.Data.DataFile != "" {
		return "", fmt.Errorf("the qcow2 disk has an external data file (%s): expected a self-contained image", info.FormatSpecific.Data.DataFile)
	}
	return domain.FormatQCOW2, nil
}

// extractDisk writes the disk of img to dst: the file at p in the image's
// flattened filesystem, or with p "", the single entry under /disk/ (as
// KubeVirt, which refuses none or several; containerdisk.Disk).
func extractDisk(ctx context.Context, img v1.Image, p, dst string) error {
	err := containerdisk.Disk(ctx, img, p, func(_ *tar.Header, r io.Reader) error { return containerdisk.WriteSparse(dst, r) })
	var le *containerdisk.LayoutError
	switch {
	case !errors.As(err, &le):
		return err
	case len(le.Found) > 1:
		return fmt.Errorf("%w: set containerDisk.path", err)
	case p != "" && len(le.Found) == 0:
		return fmt.Errorf("%w (containerDisk.path)", err)
	}
	return err
}

// lockFile takes an exclusive flock on path (created if needed) and gives
// its release; flock excludes other processes and other open files of
// this one alike.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
