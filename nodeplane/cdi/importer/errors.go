package importer

import (
	"errors"
	"fmt"
)

// Reason classifies an import failure; the DataVolume controller uses it as
// the reason of its Running/Ready conditions. Values are CamelCase like
// Kubernetes condition reasons.
type Reason string

// Failure reasons returned in Error.Reason.
const (
	// ReasonNotFound: the server answered 404 or 410. Not retryable.
	ReasonNotFound Reason = "NotFound"
	// ReasonHTTPError: another non-2xx status. Retryable for 408, 429 and
	// 5xx, not for other 4xx (401/403 need new credentials).
	ReasonHTTPError Reason = "HTTPError"
	// ReasonUnreachable: connect, TLS or transfer failure (connection
	// refused, unknown CA, body cut short). Retryable, except TLS
	// certificate errors.
	ReasonUnreachable Reason = "Unreachable"
	// ReasonTimeout: an attempt took longer than Options.Timeout. Retryable.
	ReasonTimeout Reason = "Timeout"
	// ReasonChecksumMismatch: the downloaded bytes do not hash to
	// Source.Checksum. Not retryable (see Error.Retryable).
	ReasonChecksumMismatch Reason = "ChecksumMismatch"
	// ReasonNotAnImage: the body is text/HTML or qemu-img cannot read it,
	// or it has a backing file / external data file. Not retryable.
	ReasonNotAnImage Reason = "NotAnImage"
	// ReasonTooBig: the image's virtual size exceeds Target.SizeBytes (CDI:
	// "virtual image size X is larger than the reported available storage
	// Y. A larger PVC is required"). Not retryable.
	ReasonTooBig Reason = "TooBig"
	// ReasonInvalidInput: a malformed Source or Target (bad URL, checksum
	// syntax, CA PEM, relative path). Not retryable.
	ReasonInvalidInput Reason = "InvalidInput"
	// ReasonWriteFailed: a local I/O or qemu-img convert failure (disk
	// full, permission). Retryable.
	ReasonWriteFailed Reason = "WriteFailed"
	// ReasonCanceled: the caller's context was canceled. Not retryable.
	ReasonCanceled Reason = "Canceled"
)

// Error is the error type of Import: the source URL, the Reason, whether a
// later retry may succeed, and the underlying cause (unwrappable).
//
// Retry policy. CDI itself has no per-cause policy: any importer failure
// ends the importer pod, whose restartPolicy OnFailure makes the kubelet
// rerun the whole import with crash-loop backoff (the DataVolume shows
// status.restartCount), and its ErrChecksumMismatch (pkg/importer/
// checksum.go) and ValidationSizeError (pkg/importer/errors.go) are only
// surfaced in the pod's termination message. converge retries inside Import
// only what can change by itself (network, timeouts, 408/429/5xx, local
// I/O) and marks NotFound, ChecksumMismatch, NotAnImage, TooBig and
// InvalidInput as not retryable: rerunning them downloads the same bytes to
// the same verdict, so the controller should set the DataVolume Failed with
// the reason rather than loop.
type Error struct {
	URL       string
	Reason    Reason
	Retryable bool
	Err       error
}

func (e *Error) Error() string {
	return fmt.Sprintf("import %s: %s: %v", e.URL, e.Reason, e.Err)
}

// Unwrap gives the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf gives the Reason of an *Error in err's chain, or "" if there is
// none (nil or a foreign error).
func ReasonOf(err error) Reason {
	var ie *Error
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return ""
}

// IsRetryable reports whether err is an *Error marked retryable.
func IsRetryable(err error) bool {
	var ie *Error
	return errors.As(err, &ie) && ie.Retryable
}

func newError(url string, r Reason, retryable bool, format string, args ...any) *Error {
	return &Error{URL: url, Reason: r, Retryable: retryable, Err: fmt.Errorf(format, args...)}
}
