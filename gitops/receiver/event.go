package receiver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// kind is what the receiver does with an authenticated request.
type kind int

const (
	push   kind = iota // filter by ref, then trigger
	ping               // answer 200, no trigger
	ignore             // answer 202, no trigger
)

// classify maps the event header of p to what to do with the request.
// GitHub: "push" → push, "ping" → ping (GitHub docs, "Webhook events and
// payloads"); GitLab: "Push Hook" and "Tag Push Hook" → push (GitLab docs,
// "Webhook events"); generic: always push. Every other event is ignored
// and named in the returned string.
func classify(p provider, h http.Header) (kind, string) {
	switch p {
	case github:
		switch e := h.Get(GitHubEventHeader); e {
		case "push":
			return push, e
		case "ping":
			return ping, e
		default:
			return ignore, e
		}
	case gitlab:
		switch e := h.Get(GitLabEventHeader); e {
		case "Push Hook", "Tag Push Hook":
			return push, e
		default:
			return ignore, e
		}
	}
	return push, ""
}

// pushRef reads "ref" from a push body. GitHub's form-encoded deliveries
// (Content-Type application/x-www-form-urlencoded) carry the JSON in the
// "payload" field. It returns "" and no error when the JSON has no string
// "ref"; an error when the body is not JSON.
func pushRef(contentType string, body []byte) (string, error) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return "", fmt.Errorf("form-encoded body: %w", err)
		}
		body = []byte(form.Get("payload"))
	}
	var p struct {
		Ref any `json:"ref"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return "", fmt.Errorf("body is not a JSON object: %w", err)
	}
	ref, _ := p.Ref.(string)
	return ref, nil
}

// Git ref prefixes of a push payload's "ref".
const (
	branchPrefix = "refs/heads/"
	tagPrefix    = "refs/tags/"
)

// wants reports whether a push of gitRef ("refs/heads/<b>" or
// "refs/tags/<t>"; "" when the payload named none) can change what the
// Sync's source ref resolves to: a branch Sync wants its branch, a tag or
// semver Sync wants any tag, a commit Sync or one following the default
// branch (which the receiver does not know) wants every push, and an
// unnamed ref always passes.
func wants(ref *v1alpha1.GitRef, gitRef string) bool {
	if gitRef == "" || ref == nil {
		return true
	}
	switch {
	case ref.Branch != "":
		return gitRef == branchPrefix+ref.Branch
	case ref.Tag != "" || ref.SemVer != "":
		return strings.HasPrefix(gitRef, tagPrefix)
	}
	return true
}
