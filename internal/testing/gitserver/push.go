package gitserver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Replace commits the file rel of the work tree with the first old
// replaced by new and returns the commit's SHA-1; it fails the test when
// old is not in the file.
func (r *Repo) Replace(t testing.TB, msg, rel, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), old, new, 1)
	if s == string(b) {
		t.Fatalf("%s: %q not found", rel, old)
	}
	return r.Commit(t, msg, map[string]string{rel: s})
}

// GitHubPush returns the request GitHub sends to a push webhook at url
// when branch moves to sha: a JSON push payload, X-GitHub-Event: push,
// and its HMAC-SHA256 with token in X-Hub-Signature-256.
func GitHubPush(t testing.TB, url, token, branch, sha string) *http.Request {
	t.Helper()
	body := []byte(`{"ref":"refs/heads/` + branch + `","after":"` + sha + `"}`)
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	return req
}
