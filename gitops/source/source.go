package source

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Ref selects what to check out. At most one field is set; all empty means
// the remote's default branch (the branch its HEAD points to).
//
// Branch and Tag are short names ("main", "v1.2.0"), not "refs/..." names.
// SemVer is a range in github.com/Masterminds/semver/v3 syntax ("^1.2",
// ">=1.0.0 <2.0.0", "1.x"), as Flux's GitRepository spec.ref.semver: the
// remote's tags are parsed as versions (a leading "v" is allowed; tags that
// are not versions are ignored) and the highest one in the range is used.
// Commit is a full 40-hex-digit SHA-1; the commit must be reachable from a
// branch or tag of the remote.
type Ref struct {
	Branch string
	Tag    string
	SemVer string
	Commit string
}

// String describes the ref for messages: `branch "main"`, `tag "v1"`,
// `semver "^1.2"`, `commit <sha>` or `default branch`.
func (r Ref) String() string {
	switch {
	case r.Branch != "":
		return fmt.Sprintf("branch %q", r.Branch)
	case r.Tag != "":
		return fmt.Sprintf("tag %q", r.Tag)
	case r.SemVer != "":
		return fmt.Sprintf("semver %q", r.SemVer)
	case r.Commit != "":
		return "commit " + r.Commit
	default:
		return "default branch"
	}
}

var fullSHA1 = regexp.MustCompile(`^[0-9a-f]{40}$`)

// validate returns an error wrapping ErrInvalidRef if r is not usable.
func (r Ref) validate() error {
	n := 0
	for _, v := range []string{r.Branch, r.Tag, r.SemVer, r.Commit} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w: set only one of Branch, Tag, SemVer and Commit (got Branch=%q Tag=%q SemVer=%q Commit=%q)", ErrInvalidRef, r.Branch, r.Tag, r.SemVer, r.Commit)
	}
	if r.SemVer != "" {
		if _, err := semver.NewConstraint(r.SemVer); err != nil {
			return fmt.Errorf("%w: semver range %q: %w", ErrInvalidRef, r.SemVer, err)
		}
	}
	if r.Commit != "" && !fullSHA1.MatchString(r.Commit) {
		return fmt.Errorf("%w: commit %q is not a full lower-case 40-hex-digit SHA-1", ErrInvalidRef, r.Commit)
	}
	for _, name := range []string{r.Branch, r.Tag} {
		if name != "" && (strings.HasPrefix(name, "refs/") || strings.ContainsAny(name, " ~^:?*[\\") || strings.Contains(name, "..")) {
			return fmt.Errorf("%w: %q is not a valid short branch or tag name", ErrInvalidRef, name)
		}
	}
	return nil
}

// Source is what [Fetcher.Fetch] fetches.
type Source struct {
	// URL is a local path (absolute or relative to the working directory), a
	// file:// URL, an http:// or https:// URL, an ssh:// URL
	// (ssh://git@host:2222/org/repo.git) or an scp-like SSH address
	// (git@host:org/repo.git). SSH URLs need Auth with an Identity and
	// KnownHosts.
	URL string
	// Ref selects the revision; the zero Ref is the default branch.
	Ref Ref
	// Auth holds credentials; nil means anonymous. See [Auth] and
	// [AuthFromSecret].
	Auth *Auth
	// Verify, when set, requires valid signatures by trusted keys on the
	// commit and/or tag (see [Verification]); nil verifies nothing.
	Verify *Verification
	// Timeout, when positive, replaces Options.Timeout for this Source's
	// network operations (Flux's spec.timeout).
	Timeout time.Duration
	// Owner, when set, keeps this Source's clone apart from the clones of
	// every other owner, even of the same URL and credentials: the Sync
	// controller passes "<namespace>/<name>", so no Sync reads a clone
	// another Sync fetched (as each Flux GitRepository has its own
	// artifact). Empty shares the clone by URL and credentials.
	Owner string
}

// IsLocal reports whether raw names a repository on the local filesystem
// (a path or a file:// URL) rather than a remote one. A raw URL that does
// not parse is not local. Controllers that must not read their own disk
// for a user (Flux's GitRepository refuses file://) refuse such Sources.
func IsLocal(raw string) bool {
	ep, err := parseURL(raw)
	return err == nil && ep.kind == kindLocal
}

// endpointKind is the transport family of a URL.
type endpointKind int

const (
	kindLocal endpointKind = iota
	kindHTTP
	kindSSH
)

// endpoint is a parsed, normalised Source URL.
type endpoint struct {
	kind      endpointKind
	key       string // normalised URL; the cache directory is derived from it
	display   string // URL with any password redacted, for messages
	transport string // URL handed to go-git
	user      string // SSH user named in the URL
	hostPort  string // SSH host:port
}

var (
	schemeRE  = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)
	scpLikeRE = regexp.MustCompile(`^(?:[^@/]+@)?[^/:]+:`)
)

// parseURL normalises raw. Errors wrap ErrInvalidURL or ErrUnsupportedScheme.
func parseURL(raw string) (endpoint, error) {
	if strings.TrimSpace(raw) == "" {
		return endpoint{}, fmt.Errorf("%w: URL is empty", ErrInvalidURL)
	}
	m := schemeRE.FindStringSubmatch(raw)
	if m == nil {
		if scpLikeRE.MatchString(raw) {
			return sshEndpoint(raw, raw)
		}
		return localEndpoint(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	switch scheme := strings.ToLower(m[1]); scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return endpoint{}, fmt.Errorf("%w: file URL %q names host %q; only local files are supported", ErrInvalidURL, raw, u.Host)
		}
		if u.Path == "" {
			return endpoint{}, fmt.Errorf("%w: file URL %q has no path", ErrInvalidURL, raw)
		}
		return localEndpoint(u.Path)
	case "http", "https":
		if u.Host == "" {
			return endpoint{}, fmt.Errorf("%w: %q has no host", ErrInvalidURL, raw)
		}
		u.Scheme = scheme
		u.Fragment, u.RawFragment = "", ""
		s := u.String()
		return endpoint{kind: kindHTTP, key: s, display: u.Redacted(), transport: s}, nil
	case "ssh", "git+ssh", "ssh+git":
		if u.Host == "" {
			return endpoint{}, fmt.Errorf("%w: %q has no host", ErrInvalidURL, raw)
		}
		if _, ok := u.User.Password(); ok {
			return endpoint{}, fmt.Errorf("%w: SSH URL %q carries a password; use Auth.Identity", ErrInvalidURL, u.Redacted())
		}
		u.Scheme = "ssh"
		u.Fragment, u.RawFragment = "", ""
		return sshEndpoint(u.String(), u.String())
	default:
		return endpoint{}, fmt.Errorf("%w %q in %q; only local paths, file://, http://, https://, ssh:// and scp-like user@host:path are supported", ErrUnsupportedScheme, scheme, raw)
	}
}

// sshEndpoint parses an ssh:// URL or scp-like address with go-git's
// parser, which go-git's SSH transport will use too.
func sshEndpoint(key, raw string) (endpoint, error) {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return endpoint{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	if ep.Host == "" || ep.Path == "" {
		return endpoint{}, fmt.Errorf("%w: SSH address %q needs a host and a path", ErrInvalidURL, raw)
	}
	port := ep.Port
	if port <= 0 {
		port = 22
	}
	return endpoint{
		kind:      kindSSH,
		key:       key,
		display:   raw,
		transport: raw,
		user:      ep.User,
		hostPort:  net.JoinHostPort(ep.Host, strconv.Itoa(port)),
	}, nil
}

// localEndpoint normalises a local path to an absolute, clean path.
func localEndpoint(path string) (endpoint, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return endpoint{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	key := (&url.URL{Scheme: "file", Path: abs}).String()
	return endpoint{
		kind:      kindLocal,
		key:       key,
		display:   key,
		transport: (&url.URL{Scheme: localScheme, Path: abs}).String(),
	}, nil
}

// displayURL returns raw with any password redacted, for errors raised before
// the URL is parsed successfully.
func displayURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return raw
}
