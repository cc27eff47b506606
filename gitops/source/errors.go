package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Sentinel errors. Errors returned by this package wrap one of these where it
// applies; test for them with errors.Is.
var (
	// ErrInvalidURL means the Source URL is empty or cannot be parsed.
	ErrInvalidURL = errors.New("invalid URL")
	// ErrUnsupportedScheme means the Source URL uses a transport other than a
	// local path, file://, http://, https://, ssh:// or scp-like
	// user@host:path (for example git://).
	ErrUnsupportedScheme = errors.New("unsupported URL scheme")
	// ErrAuthentication means the credentials are missing, incomplete or
	// contradictory (Source.Auth, [AuthFromSecret]; an SSH URL without SSH
	// auth or without known_hosts), the server refused them (HTTP 401/403,
	// SSH public key not accepted), or the server's identity could not be
	// verified (SSH host key unknown or different from known_hosts, HTTPS
	// certificate not signed by a trusted CA).
	ErrAuthentication = errors.New("authentication failed")
	// ErrVerification means a commit or tag signature required by
	// Source.Verify is missing, invalid, or made by a key that is not
	// trusted, or that the Verification itself is unusable
	// ([VerificationFromSecret]).
	ErrVerification = errors.New("signature verification failed")
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
	// Authentication problems win: a TLS or SSH host key failure also looks
	// like a network error (*url.Error, net.Error) further up the chain.
	if anyCause(err, isAuthError) {
		sentinel = ErrAuthentication
	} else {
		anyCause(err, func(e error) bool {
			sentinel = sentinelFor(e)
			return sentinel != nil
		})
	}
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

// isAuthError reports whether one error (not its chain) says that
// credentials were refused or the server's identity could not be verified.
func isAuthError(e error) bool {
	switch e {
	case ErrAuthentication, transport.ErrAuthenticationRequired, transport.ErrAuthorizationFailed, transport.ErrInvalidAuthMethod:
		return true
	}
	switch e.(type) {
	case *knownhosts.KeyError, *tls.CertificateVerificationError, x509.UnknownAuthorityError, *x509.UnknownAuthorityError,
		x509.HostnameError, *x509.HostnameError, x509.CertificateInvalidError, *x509.CertificateInvalidError:
		return true
	}
	// golang.org/x/crypto/ssh has no type for a refused client key.
	return strings.Contains(e.Error(), "ssh: unable to authenticate")
}

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
