package receiver

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
)

// Headers read by the receiver.
const (
	// GitHubEventHeader names the GitHub event ("push", "ping", ...).
	GitHubEventHeader = "X-GitHub-Event"
	// GitHubSignatureHeader is "sha256=<hex HMAC-SHA256(body, token)>".
	GitHubSignatureHeader = "X-Hub-Signature-256"
	// GitLabEventHeader names the GitLab event ("Push Hook", "Tag Push Hook", ...).
	GitLabEventHeader = "X-Gitlab-Event"
	// GitLabTokenHeader is the token itself.
	GitLabTokenHeader = "X-Gitlab-Token"
	// SignatureHeader is the generic "<sha1|sha256|sha512>=<hex HMAC(body, token)>".
	SignatureHeader = "X-Signature"
)

// provider is the sender of a webhook, recognised by its event header.
type provider int

const (
	generic provider = iota
	github
	gitlab
)

func (p provider) String() string {
	switch p {
	case github:
		return "GitHub"
	case gitlab:
		return "GitLab"
	}
	return "generic"
}

// detect tells the sender from the event headers: X-GitHub-Event first,
// then X-Gitlab-Event, else generic.
func detect(h http.Header) provider {
	switch {
	case h.Get(GitHubEventHeader) != "":
		return github
	case h.Get(GitLabEventHeader) != "":
		return gitlab
	}
	return generic
}

// errUnauthenticated wraps every authentication failure.
var errUnauthenticated = errors.New("unauthenticated")

// authenticate checks the request's signature or token for p against
// token, over the raw body. It returns nil or an error wrapping
// errUnauthenticated that names the header and what was expected; an
// empty token authenticates nothing.
func authenticate(p provider, h http.Header, body, token []byte) error {
	if len(token) == 0 {
		// An empty key would make every HMAC computable (the Index
		// refuses empty tokens; this keeps it so here too).
		return fmt.Errorf("%w: the receiver has no token", errUnauthenticated)
	}
	switch p {
	case github:
		sig := h.Get(GitHubSignatureHeader)
		if sig == "" {
			return fmt.Errorf("%w: header %s: missing", errUnauthenticated, GitHubSignatureHeader)
		}
		algo, _, _ := strings.Cut(sig, "=")
		if algo != "sha256" {
			return fmt.Errorf("%w: header %s: want sha256=<hex HMAC-SHA256 of the body>, got %q", errUnauthenticated, GitHubSignatureHeader, redact(sig))
		}
		return verifyHMAC(GitHubSignatureHeader, sig, body, token)
	case gitlab:
		got := h.Get(GitLabTokenHeader)
		if subtle.ConstantTimeCompare([]byte(got), token) != 1 {
			if got == "" {
				return fmt.Errorf("%w: header %s: missing", errUnauthenticated, GitLabTokenHeader)
			}
			return fmt.Errorf("%w: header %s: does not match the token", errUnauthenticated, GitLabTokenHeader)
		}
		return nil
	default:
		return verifyHMAC(SignatureHeader, h.Get(SignatureHeader), body, token)
	}
}

// hashes are the HMAC algorithms of the "<algo>=<hex>" signature format,
// those go-github's ValidateSignature accepts (Flux's generic-hmac).
var hashes = map[string]func() hash.Hash{
	"sha1":   sha1.New,
	"sha256": sha256.New,
	"sha512": sha512.New,
}

// verifyHMAC checks that sig, the value of header, is
// "<sha1|sha256|sha512>=<hex HMAC of body keyed with key>", comparing the
// MACs in constant time.
func verifyHMAC(header, sig string, body, key []byte) error {
	if sig == "" {
		return fmt.Errorf("%w: header %s: missing", errUnauthenticated, header)
	}
	algo, hexMAC, ok := strings.Cut(sig, "=")
	newHash, known := hashes[algo]
	if !ok || !known {
		return fmt.Errorf("%w: header %s: want <sha1|sha256|sha512>=<hex HMAC of the body>, got %q", errUnauthenticated, header, redact(sig))
	}
	got, err := hex.DecodeString(hexMAC)
	if err != nil {
		return fmt.Errorf("%w: header %s: the MAC after %q is not hex", errUnauthenticated, header, algo+"=")
	}
	mac := hmac.New(newHash, key)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: header %s: %s HMAC of the body does not match", errUnauthenticated, header, algo)
	}
	return nil
}

// redact keeps the algorithm prefix of a signature for a log line and
// drops the rest.
func redact(sig string) string {
	if algo, _, ok := strings.Cut(sig, "="); ok && len(algo) <= 8 {
		return algo + "=…"
	}
	if len(sig) > 8 {
		return sig[:8] + "…"
	}
	return sig
}
