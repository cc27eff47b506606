package importer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// qcow2Magic starts every qcow2 file ("QFI\xfb").
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// download is the outcome of a successful fetch into a temporary file.
type download struct {
	bytes    int64
	attempts int
	convert  bool // qcow2 magic seen: conversion will follow
}

// httpClient builds the client for src: system roots, or only src.CA.
func httpClient(src Source) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(src.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(src.CA) {
			return nil, fmt.Errorf("CA: expected PEM certificates, found none")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}

// fetch downloads src.URL into f (truncated before each attempt), retrying
// retryable failures with backoff. sum, if set, is reset and fed per attempt.
// limit > 0 bounds the body size (ReasonTooBig beyond it).
func fetch(ctx context.Context, client *http.Client, src Source, f *spool, sum *checksum, limit int64, opts Options, rep *reporter) (download, error) {
	return withRetries(ctx, src.URL, opts, func() (download, *Error) {
		return fetchOnce(ctx, client, src, f, sum, limit, opts, rep)
	})
}

// withRetries runs once until it succeeds, fails with an error that is not
// retryable, or has failed opts.Retries+1 times, waiting opts.Backoff
// (doubled each time up to opts.MaxBackoff) in between; label names the
// source in errors.
func withRetries(ctx context.Context, label string, opts Options, once func() (download, *Error)) (download, error) {
	backoff := opts.Backoff
	var last *Error
	for attempt := 1; ; attempt++ {
		d, err := once()
		if err == nil {
			d.attempts = attempt
			return d, nil
		}
		last = err
		if !err.Retryable || attempt > opts.Retries {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return download{attempts: attempt}, newError(label, ReasonCanceled, false, "canceled while waiting to retry after %v: %w", last.Err, ctx.Err())
		case <-t.C:
		}
		if backoff *= 2; opts.MaxBackoff > 0 && backoff > opts.MaxBackoff {
			backoff = opts.MaxBackoff
		}
	}
	if last.Retryable && opts.Retries > 0 {
		last.Err = fmt.Errorf("after %d attempts: %w", opts.Retries+1, last.Err)
	}
	return download{}, last
}

// fetchOnce is one attempt.
func fetchOnce(ctx context.Context, client *http.Client, src Source, f *spool, sum *checksum, limit int64, opts Options, rep *reporter) (download, *Error) {
	actx := ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	classify := func(err error, during string) *Error {
		switch {
		case ctx.Err() != nil:
			return newError(src.URL, ReasonCanceled, false, "%s: %w", during, ctx.Err())
		case actx.Err() != nil:
			return newError(src.URL, ReasonTimeout, true, "%s: no complete answer within %v", during, opts.Timeout)
		case isTLSVerify(err):
			return newError(src.URL, ReasonUnreachable, false, "%s: TLS verification failed (is the CA right?): %w", during, err)
		}
		return newError(src.URL, ReasonUnreachable, true, "%s: %w", during, err)
	}
	if err := f.Truncate(0); err != nil {
		return download{}, newError(src.URL, ReasonWriteFailed, true, "truncate %s: %w", f.Name(), err)
	}
	if sum != nil {
		sum.h.Reset()
	}
	req, err := http.NewRequestWithContext(actx, http.MethodGet, src.URL, nil)
	if err != nil {
		return download{}, newError(src.URL, ReasonInvalidInput, false, "request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return download{}, classify(err, "GET")
	}
	defer resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound || code == http.StatusGone:
		return download{}, newError(src.URL, ReasonNotFound, false, "GET: server answered %s, expected 200 OK", resp.Status)
	case code < 200 || code > 299:
		retry := code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
		return download{}, newError(src.URL, ReasonHTTPError, retry, "GET: server answered %s, expected 200 OK", resp.Status)
	}
	return copyBody(src.URL, resp.Body, resp.ContentLength, resp.Header.Get("Content-Type"), f, sum, limit, rep, classify)
}

// copyBody writes body (total bytes; -1: unknown) into the empty file f,
// sparse, feeding sum (optional) and rep. ctype is the declared
// Content-Type ("" if none). It refuses a text/HTML/XML body
// (ReasonNotAnImage), a body over limit (> 0; ReasonTooBig) and a body of
// another length than total; readErr classifies read errors of body.
// label names the source in errors.
func copyBody(label string, body io.Reader, total int64, ctype string, f *spool, sum *checksum, limit int64, rep *reporter, readErr func(err error, during string) *Error) (download, *Error) {
	tooBig := func(what string) *Error {
		return newError(label, ReasonTooBig, false, "%s: more than %d bytes, the most an image for this volume can take; a larger PVC is required", what, limit)
	}
	if limit > 0 && total > limit {
		return download{}, tooBig(fmt.Sprintf("Content-Length %d", total))
	}

	// Sniff the first bytes: an HTML page (a login or error page served
	// with 200) is not an image, though qemu-img would call it raw.
	head := make([]byte, 512)
	n, err := io.ReadFull(body, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return download{}, readErr(err, "reading body")
	}
	head = head[:n]
	ct := http.DetectContentType(head)
	if strings.HasPrefix(ct, "text/html") || strings.HasPrefix(ct, "text/xml") ||
		strings.HasPrefix(strings.ToLower(ctype), "text/html") {
		return download{}, newError(label, ReasonNotAnImage, false, "body is a %s document (Content-Type %q), expected a disk image (raw, qcow2, ...)", ct, ctype)
	}
	convert := bytes.HasPrefix(head, qcow2Magic)
	f.begin(total, convert)
	weight := 99.0
	if convert {
		weight = 50
	}
	w := &sparseWriter{f: f}
	var dst io.Writer = w
	if sum != nil {
		dst = io.MultiWriter(w, sum.h)
	}
	pw := &progressWriter{w: dst, total: total, weight: weight, rep: rep, limit: limit}
	if _, err := pw.Write(head); err != nil {
		return download{}, newError(label, ReasonWriteFailed, true, "write %s: %w", f.Name(), err)
	}
	if _, err := io.CopyBuffer(pw, body, make([]byte, 1<<20)); err != nil {
		if errors.Is(pw.werr, errTooBig) {
			return download{}, tooBig(fmt.Sprintf("body stopped after %d bytes", pw.n))
		}
		if pw.werr != nil {
			return download{}, newError(label, ReasonWriteFailed, true, "write %s: %w", f.Name(), pw.werr)
		}
		return download{}, readErr(err, fmt.Sprintf("reading body after %d bytes", pw.n))
	}
	if total >= 0 && pw.n != total {
		return download{}, readErr(fmt.Errorf("body ended after %d bytes, Content-Length said %d", pw.n, total), "reading body")
	}
	if err := w.finish(); err != nil {
		return download{}, newError(label, ReasonWriteFailed, true, "write %s: %w", f.Name(), err)
	}
	rep.update(pw.n, total, pw.percent(), true)
	return download{bytes: pw.n, convert: convert}, nil
}

// isTLSVerify reports a certificate verification failure (not transient).
func isTLSVerify(err error) bool {
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	var cve *tls.CertificateVerificationError
	return errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie) || errors.As(err, &cve)
}

// progressWriter counts bytes and reports download progress.
type progressWriter struct {
	w      io.Writer
	n      int64
	total  int64
	weight float64
	rep    *reporter
	limit  int64
	werr   error
}

var errTooBig = errors.New("body exceeds the size limit")

func (p *progressWriter) Write(b []byte) (int, error) {
	if p.limit > 0 && p.n+int64(len(b)) > p.limit {
		p.werr = errTooBig
		return 0, errTooBig
	}
	n, err := p.w.Write(b)
	p.n += int64(n)
	if err != nil {
		p.werr = err
		return n, err
	}
	p.rep.update(p.n, p.total, p.percent(), false)
	return n, nil
}

func (p *progressWriter) percent() float64 {
	if p.total <= 0 {
		return 0
	}
	return float64(p.n) / float64(p.total) * p.weight
}
