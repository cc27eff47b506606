package gitops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Sentinel errors. Errors returned by this package wrap one of these where it
// applies; test for them with errors.Is.
var (
	// ErrInvalidURL means the Source URL is empty or cannot be parsed.
	ErrInvalidURL = errors.New("invalid URL")
	// ErrUnsupportedScheme means the Source URL uses a transport other than a
	// local path, file://, http:// or https:// (for example ssh:// or
	// scp-like user@host:path).
	ErrUnsupportedScheme = errors.New("unsupported URL scheme")
	// ErrInvalidRef means the Ref sets more than one field or Commit is not a
	// full 40-hex-digit SHA-1.
	ErrInvalidRef = errors.New("invalid ref")
	// ErrUnreachable means the repository could not be contacted: connection
	// refused, DNS failure, timeout, or a transport failure mid-transfer.
	ErrUnreachable = errors.New("repository unreachable")
	// ErrRepositoryNotFound means the server (or local path) was reached but
	// holds no repository at that URL.
	ErrRepositoryNotFound = errors.New("repository not found")
	// ErrRefNotFound means the repository has no such branch, tag or commit,
	// or is empty.
	ErrRefNotFound = errors.New("ref not found")
	// ErrPathNotFound means Artifact.Path was asked for a path that does not
	// exist in the work tree.
	ErrPathNotFound = errors.New("path not found")
	// ErrPathEscapes means Artifact.Path was asked for an absolute path, a
	// path with ".." leading out of the work tree, or a path whose symbolic
	// links resolve outside the work tree.
	ErrPathEscapes = errors.New("path escapes the artifact")
)

// FetchError is the error type returned by [Fetcher.Fetch]. It names the URL
// (credentials redacted) and the Ref being fetched; Err holds the cause and
// usually wraps one of the sentinel errors above. Use errors.As to get at the
// fields and errors.Is to classify.
type FetchError struct {
	URL string // Source.URL with any password redacted
	Ref Ref    // the requested ref
	Err error  // the cause
}

// Error returns "gitops: fetch <ref> from <url>: <cause>".
func (e *FetchError) Error() string {
	return fmt.Sprintf("gitops: fetch %s from %s: %v", e.Ref, e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *FetchError) Unwrap() error { return e.Err }

// classifyTransport wraps an error from a go-git remote operation with the
// sentinel that describes it, keeping the original error in the chain.
func classifyTransport(op string, err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	anyCause(err, func(e error) bool {
		sentinel = sentinelFor(e)
		return sentinel != nil
	})
	if sentinel == nil || errors.Is(err, sentinel) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w", op, &classified{sentinel: sentinel, err: err})
}

// classified puts a sentinel into the chain of err without repeating it in
// the message when err already says the same.
type classified struct{ sentinel, err error }

func (c *classified) Error() string {
	msg := strings.TrimSuffix(c.err.Error(), ": ")
	if strings.Contains(msg, c.sentinel.Error()) {
		return msg
	}
	return c.sentinel.Error() + ": " + msg
}

func (c *classified) Unwrap() []error { return []error{c.sentinel, c.err} }

// sentinelFor maps one error (not its chain) to a sentinel, or nil.
func sentinelFor(e error) error {
	switch e {
	case ErrRefNotFound, ErrRepositoryNotFound, ErrUnreachable:
		return e
	case transport.ErrRepositoryNotFound:
		return ErrRepositoryNotFound
	case transport.ErrEmptyRemoteRepository:
		return ErrRefNotFound
	case context.DeadlineExceeded:
		return ErrUnreachable
	}
	switch e := e.(type) {
	case *githttp.Err:
		if e.StatusCode() >= 500 {
			return ErrUnreachable
		}
	case net.Error, *url.Error:
		return ErrUnreachable
	}
	return nil
}

// anyCause reports whether f holds for err or any error in its chain,
// including the causes inside go-git's plumbing errors, which do not
// implement Unwrap.
func anyCause(err error, f func(error) bool) bool {
	if err == nil {
		return false
	}
	if f(err) {
		return true
	}
	switch e := err.(type) {
	case *plumbing.UnexpectedError:
		return anyCause(e.Err, f)
	case *plumbing.PermanentError:
		return anyCause(e.Err, f)
	case interface{ Unwrap() error }:
		return anyCause(e.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, c := range e.Unwrap() {
			if anyCause(c, f) {
				return true
			}
		}
	}
	return false
}
