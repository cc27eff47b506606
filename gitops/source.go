package gitops

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Ref selects what to check out. At most one field is set; all empty means
// the remote's default branch (the branch its HEAD points to).
//
// Branch and Tag are short names ("main", "v1.2.0"), not "refs/..." names.
// Commit is a full 40-hex-digit SHA-1; the commit must be reachable from a
// branch or tag of the remote.
type Ref struct {
	Branch string
	Tag    string
	Commit string
}

// String describes the ref for messages: `branch "main"`, `tag "v1"`,
// `commit <sha>` or `default branch`.
func (r Ref) String() string {
	switch {
	case r.Branch != "":
		return fmt.Sprintf("branch %q", r.Branch)
	case r.Tag != "":
		return fmt.Sprintf("tag %q", r.Tag)
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
	for _, v := range []string{r.Branch, r.Tag, r.Commit} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w: set only one of Branch, Tag and Commit (got Branch=%q Tag=%q Commit=%q)", ErrInvalidRef, r.Branch, r.Tag, r.Commit)
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

// Source is a repository URL and a ref. URL is a local path (absolute or
// relative to the working directory), a file:// URL, or an http:// or
// https:// URL.
type Source struct {
	URL string
	Ref Ref
}

// endpoint is a parsed, normalised Source URL.
type endpoint struct {
	key       string // normalised URL; the cache directory is derived from it
	display   string // URL with any password redacted, for messages
	transport string // URL handed to go-git
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
			return endpoint{}, fmt.Errorf("%w: %q looks like an scp-style SSH address; only local paths, file://, http:// and https:// are supported", ErrUnsupportedScheme, raw)
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
		return endpoint{key: s, display: u.Redacted(), transport: s}, nil
	default:
		return endpoint{}, fmt.Errorf("%w %q in %q; only local paths, file://, http:// and https:// are supported", ErrUnsupportedScheme, scheme, raw)
	}
}

// localEndpoint normalises a local path to an absolute, clean path.
func localEndpoint(path string) (endpoint, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return endpoint{}, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	key := (&url.URL{Scheme: "file", Path: abs}).String()
	return endpoint{
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
