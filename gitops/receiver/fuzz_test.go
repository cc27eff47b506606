package receiver

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// The seed corpora are in testdata/fuzz/<target>; run a target with
//
//	go test -run '^$' -fuzz FuzzPushRef -fuzztime 30s ./gitops/receiver
//
// (plain `go test` runs the seeds).

// FuzzPushRef feeds pushRef any content type and body: it never panics, a
// body it accepts is JSON (or a form around JSON), and a push payload
// built from any valid UTF-8 ref, as JSON or as GitHub's form encoding,
// gives that ref back.
func FuzzPushRef(f *testing.F) {
	f.Add("application/json", []byte(`{"ref":"refs/heads/main","after":"0123"}`), "refs/heads/main")
	f.Add("application/x-www-form-urlencoded", []byte("payload="+url.QueryEscape(`{"ref":"refs/tags/v1"}`)), "refs/tags/v1")
	f.Fuzz(func(t *testing.T, contentType string, body []byte, ref string) {
		got, err := pushRef(contentType, body)
		if err == nil && !isForm(contentType) && !json.Valid(body) {
			t.Errorf("pushRef(%q, %q) = %q, accepted a body that is not JSON", contentType, body, got)
		}
		if err != nil && got != "" {
			t.Errorf("pushRef(%q, %q) = %q with error %v, want no ref", contentType, body, got, err)
		}

		if !utf8.ValidString(ref) {
			return // JSON cannot carry it unchanged
		}
		payload, err := json.Marshal(map[string]any{"ref": ref, "after": "0123", "commits": []any{}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ ct, body string }{
			{"application/json", string(payload)},
			{"", string(payload)},
			{"application/x-www-form-urlencoded", "payload=" + url.QueryEscape(string(payload))},
			{"application/x-www-form-urlencoded; charset=utf-8", "payload=" + url.QueryEscape(string(payload))},
		} {
			if got, err := pushRef(tc.ct, []byte(tc.body)); err != nil || got != ref {
				t.Errorf("pushRef(%q, %q) = %q, %v; want %q", tc.ct, tc.body, got, err, ref)
			}
		}
	})
}

func isForm(contentType string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(contentType)), "application/x-www-form-urlencoded")
}

// FuzzSignature feeds the three providers' header parsers any header
// value, body and token. Each accepts exactly what the oracle accepts: a
// generic X-Signature of "<sha1|sha256|sha512>=<hex HMAC>" (hex of either
// case), a GitHub X-Hub-Signature-256 of "sha256=<hex HMAC-SHA256>", a
// GitLab X-Gitlab-Token equal to the token, and nothing for an empty
// token. A refusal wraps errUnauthenticated and never shows the expected
// MAC; the right signature of the body is always accepted.
func FuzzSignature(f *testing.F) {
	f.Add("sha256="+hex.EncodeToString(mac(sha256.New, testBody, testToken)), testBody, testToken)
	f.Add("sha1=zz", testBody, testToken)
	f.Add("", []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, sig string, body, token []byte) {
		macs := map[string]string{
			"sha1":   hex.EncodeToString(mac(sha1.New, body, token)),
			"sha256": hex.EncodeToString(mac(sha256.New, body, token)),
			"sha512": hex.EncodeToString(mac(sha512.New, body, token)),
		}
		oracle := func(algos ...string) bool {
			for _, a := range algos {
				if rest, ok := strings.CutPrefix(sig, a+"="); ok && strings.EqualFold(rest, macs[a]) {
					return true
				}
			}
			return false
		}
		tokenOK := len(token) > 0
		for _, tc := range []struct {
			p    provider
			h    []string
			want bool
		}{
			{generic, []string{SignatureHeader, sig}, tokenOK && oracle("sha1", "sha256", "sha512")},
			{github, []string{GitHubEventHeader, "push", GitHubSignatureHeader, sig}, tokenOK && oracle("sha256")},
			{gitlab, []string{GitLabEventHeader, "Push Hook", GitLabTokenHeader, sig}, tokenOK && sig == string(token)},
		} {
			err := authenticate(tc.p, header(tc.h...), body, token)
			if (err == nil) != tc.want {
				t.Errorf("%s: authenticate(%q, body %q, token %q) = %v, want accepted %v", tc.p, sig, body, token, err, tc.want)
			}
			if err != nil && !errors.Is(err, errUnauthenticated) {
				t.Errorf("%s: error does not wrap errUnauthenticated: %v", tc.p, err)
			}
			for _, m := range macs {
				if err != nil && tokenOK && strings.Contains(strings.ToLower(err.Error()), m[:16]) {
					t.Errorf("%s: error shows the expected MAC: %v", tc.p, err)
				}
			}
		}
		if !tokenOK {
			return
		}
		for a, m := range macs {
			for _, s := range []string{a + "=" + m, a + "=" + strings.ToUpper(m)} {
				if err := authenticate(generic, header(SignatureHeader, s), body, token); err != nil {
					t.Errorf("generic: the right signature %q refused: %v", s, err)
				}
			}
		}
	})
}

func mac(newHash func() hash.Hash, body, key []byte) []byte {
	m := hmac.New(newHash, key)
	m.Write(body)
	return m.Sum(nil)
}
