package receiver

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strings"
	"testing"
)

var (
	testToken = []byte("s3cret-token")
	testBody  = []byte(`{"ref":"refs/heads/main"}`)
)

func sign(algo string, newHash func() hash.Hash, body, key []byte) string {
	m := hmac.New(newHash, key)
	m.Write(body)
	return algo + "=" + hex.EncodeToString(m.Sum(nil))
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestAuthenticate(t *testing.T) {
	gh := sign("sha256", sha256.New, testBody, testToken)
	tests := []struct {
		name string
		h    http.Header
		body []byte
		want provider
		ok   bool
	}{
		{"GitHub sha256", header(GitHubEventHeader, "push", GitHubSignatureHeader, gh), testBody, github, true},
		{"GitHub upper-case hex", header(GitHubEventHeader, "push", GitHubSignatureHeader, "sha256="+strings.ToUpper(strings.TrimPrefix(gh, "sha256="))), testBody, github, true},
		{"GitHub legacy sha1 header only", header(GitHubEventHeader, "push", "X-Hub-Signature", sign("sha1", sha1.New, testBody, testToken)), testBody, github, false},
		{"GitHub sha1 in the sha256 header", header(GitHubEventHeader, "push", GitHubSignatureHeader, sign("sha1", sha1.New, testBody, testToken)), testBody, github, false},
		{"GitHub signature of another body", header(GitHubEventHeader, "push", GitHubSignatureHeader, gh), []byte(`{"ref":"refs/heads/evil"}`), github, false},
		{"GitHub missing signature", header(GitHubEventHeader, "push"), testBody, github, false},
		{"GitHub generic header instead", header(GitHubEventHeader, "push", SignatureHeader, gh), testBody, github, false},
		{"GitHub non-hex", header(GitHubEventHeader, "push", GitHubSignatureHeader, "sha256=zz"), testBody, github, false},
		{"GitHub truncated MAC", header(GitHubEventHeader, "push", GitHubSignatureHeader, gh[:len(gh)-2]), testBody, github, false},
		{"GitLab token", header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, string(testToken)), testBody, gitlab, true},
		{"GitLab wrong token", header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, "s3cret-tokeN"), testBody, gitlab, false},
		{"GitLab token prefix", header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, "s3cret"), testBody, gitlab, false},
		{"GitLab missing token", header(GitLabEventHeader, "Push Hook"), testBody, gitlab, false},
		{"GitLab HMAC instead of token", header(GitLabEventHeader, "Push Hook", SignatureHeader, gh), testBody, gitlab, false},
		{"generic sha1", header(SignatureHeader, sign("sha1", sha1.New, testBody, testToken)), testBody, generic, true},
		{"generic sha256", header(SignatureHeader, gh), testBody, generic, true},
		{"generic sha512", header(SignatureHeader, sign("sha512", sha512.New, testBody, testToken)), testBody, generic, true},
		{"generic sha512 MAC under sha256 prefix", header(SignatureHeader, "sha256="+strings.TrimPrefix(sign("sha512", sha512.New, testBody, testToken), "sha512=")), testBody, generic, false},
		{"generic md5 prefix", header(SignatureHeader, "md5=00"), testBody, generic, false},
		{"generic no prefix", header(SignatureHeader, strings.TrimPrefix(gh, "sha256=")), testBody, generic, false},
		{"generic missing", header(), testBody, generic, false},
		{"generic GitHub header without event", header(GitHubSignatureHeader, gh), testBody, generic, false},
		{"generic GitLab token without event", header(GitLabTokenHeader, string(testToken)), testBody, generic, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := detect(tt.h)
			if p != tt.want {
				t.Fatalf("detect: got %s, want %s", p, tt.want)
			}
			err := authenticate(p, tt.h, tt.body, testToken)
			if tt.ok && err != nil {
				t.Fatalf("want accepted, got %v", err)
			}
			if !tt.ok {
				if err == nil {
					t.Fatal("want refused, got accepted")
				}
				if !errors.Is(err, errUnauthenticated) {
					t.Fatalf("error does not wrap errUnauthenticated: %v", err)
				}
				if strings.Contains(err.Error(), string(testToken)) {
					t.Fatalf("error reveals the token: %v", err)
				}
				t.Log(err)
			}
		})
	}
}

// TestWrongKey: a signature computed with any key but the token is
// refused, for every algorithm and provider that signs.
func TestWrongKey(t *testing.T) {
	wrongKeys := [][]byte{
		nil,
		[]byte("s3cret-tokeN"),              // one byte differs
		[]byte("s3cret-toke"),               // a prefix
		[]byte("s3cret-token\n"),            // trailing newline (kubectl --from-file)
		[]byte("s3cret-token s3cret-token"), // longer
		[]byte("S3CRET-TOKEN"),              // same length, other case
		[]byte("token"),                     // the Secret key name
	}
	algos := []struct {
		name string
		new  func() hash.Hash
	}{{"sha1", sha1.New}, {"sha256", sha256.New}, {"sha512", sha512.New}}
	for _, key := range wrongKeys {
		for _, a := range algos {
			sig := sign(a.name, a.new, testBody, key)
			if err := authenticate(generic, header(SignatureHeader, sig), testBody, testToken); err == nil {
				t.Errorf("generic %s signature with key %q accepted", a.name, key)
			}
			if a.name == "sha256" {
				if err := authenticate(github, header(GitHubEventHeader, "push", GitHubSignatureHeader, sig), testBody, testToken); err == nil {
					t.Errorf("GitHub signature with key %q accepted", key)
				}
			}
		}
		if err := authenticate(gitlab, header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, string(key)), testBody, testToken); err == nil {
			t.Errorf("GitLab token %q accepted", key)
		}
	}
	// The right key is accepted by the same calls, so the refusals above
	// are about the key.
	for _, a := range algos {
		if err := authenticate(generic, header(SignatureHeader, sign(a.name, a.new, testBody, testToken)), testBody, testToken); err != nil {
			t.Errorf("generic %s signature with the token refused: %v", a.name, err)
		}
	}
}

// TestEmptyToken: a receiver without a token authenticates nothing, not
// even a signature made with the empty key.
func TestEmptyToken(t *testing.T) {
	for _, tc := range []struct {
		p provider
		h http.Header
	}{
		{generic, header(SignatureHeader, sign("sha256", sha256.New, testBody, nil))},
		{github, header(GitHubEventHeader, "push", GitHubSignatureHeader, sign("sha256", sha256.New, testBody, nil))},
		{gitlab, header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, "")},
	} {
		if err := authenticate(tc.p, tc.h, testBody, nil); !errors.Is(err, errUnauthenticated) {
			t.Errorf("%s with an empty token: %v, want refused", tc.p, err)
		}
	}
}
