package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/testing/gitserver"
	"golang.org/x/crypto/ssh"
)

// secretWords are credentials used below; no error or url file may hold them.
var secretWords = []string{"s3cret-pw", "wrong-pw", "tok-123", "tok-bad", "key-pass"}

func assertNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, w := range secretWords {
		if strings.Contains(s, w) {
			t.Errorf("%s leaks %q: %s", what, w, s)
		}
	}
}

// authCase is one Fetch against a server with credentials: it succeeds
// (want nil) or fails with an error wrapping want and mentioning substr.
type authCase struct {
	name   string
	url    string
	auth   *Auth
	want   error
	substr string
}

func runAuthCases(t *testing.T, cases []authCase, wantCommit string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cacheDir := t.TempDir()
			start := time.Now()
			a, err := NewFetcher(Options{CacheDir: cacheDir, Timeout: 20 * time.Second}).Fetch(t.Context(), Source{URL: tc.url, Auth: tc.auth})
			t.Logf("%s: %v", tc.name, time.Since(start))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				if a.Commit != wantCommit {
					t.Fatalf("commit %s, want %s", a.Commit, wantCommit)
				}
				b, err := os.ReadFile(filepath.Join(cacheRoot(t, cacheDir), "url"))
				if err != nil {
					t.Fatal(err)
				}
				assertNoSecrets(t, "url file", string(b))
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q does not mention %q", err, tc.substr)
			}
			if a != (Artifact{}) {
				t.Errorf("failed Fetch returned %+v", a)
			}
			assertNoSecrets(t, "error", err.Error())
			t.Logf("error: %v", err)
		})
	}
}

func TestAuthHTTP(t *testing.T) {
	root := t.TempDir()
	repo := gitserver.NewRepo(t, root, "cfg", "main")
	sha := repo.Commit(t, "one", map[string]string{"a.yaml": "a: 1\n"})
	basic := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{Username: "bot", Password: "s3cret-pw"})
	bearer := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{BearerToken: "tok-123"})
	tlsSrv := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{TLS: true, Username: "bot", Password: "s3cret-pw"})
	otherCA := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{TLS: true}).CAPEM

	runAuthCases(t, []authCase{
		{"basic", basic.RepoURL(repo), &Auth{Username: "bot", Password: "s3cret-pw"}, nil, ""},
		{"basic wrong password", basic.RepoURL(repo), &Auth{Username: "bot", Password: "wrong-pw"}, ErrAuthentication, basic.RepoURL(repo)},
		{"basic missing", basic.RepoURL(repo), nil, ErrAuthentication, "authentication"},
		{"bearer", bearer.RepoURL(repo), &Auth{BearerToken: "tok-123"}, nil, ""},
		{"bearer wrong", bearer.RepoURL(repo), &Auth{BearerToken: "tok-bad"}, ErrAuthentication, "authentication"},
		{"bearer as basic", bearer.RepoURL(repo), &Auth{Username: "bot", Password: "tok-123"}, ErrAuthentication, "authentication"},
		{"https with CA", tlsSrv.RepoURL(repo), &Auth{Username: "bot", Password: "s3cret-pw", CAPEM: tlsSrv.CAPEM}, nil, ""},
		{"https without CA", tlsSrv.RepoURL(repo), &Auth{Username: "bot", Password: "s3cret-pw"}, ErrAuthentication, "certificate"},
		{"https with another CA", tlsSrv.RepoURL(repo), &Auth{Username: "bot", Password: "s3cret-pw", CAPEM: otherCA}, ErrAuthentication, "certificate"},
		{"password in URL redacted", strings.Replace(basic.RepoURL(repo), "http://", "http://bot:wrong-pw@", 1), nil, ErrAuthentication, "bot:xxxxx@"},
		{"ssh key for https", tlsSrv.RepoURL(repo), &Auth{Identity: gitserver.NewSSHKey(t, "").PrivatePEM}, ErrAuthentication, "Identity"},
		{"username without password", basic.RepoURL(repo), &Auth{Username: "bot"}, ErrAuthentication, "without Password"},
		{"auth for a local path", repo.Dir, &Auth{BearerToken: "tok-123"}, ErrAuthentication, "takes no Auth"},
	}, sha)
}

func TestAuthSSH(t *testing.T) {
	root := t.TempDir()
	repo := gitserver.NewRepo(t, root, "cfg", "main")
	sha := repo.Commit(t, "one", map[string]string{"a.yaml": "a: 1\n"})
	key := gitserver.NewSSHKey(t, "")
	encKey := gitserver.NewSSHKey(t, "key-pass")
	stranger := gitserver.NewSSHKey(t, "")
	srv := gitserver.NewSSH(t, root, gitserver.SSHOptions{AuthorizedKeys: []ssh.PublicKey{key.Public, encKey.Public}})
	other := gitserver.NewSSH(t, root, gitserver.SSHOptions{})
	url := srv.RepoURL(repo)
	_, port, _ := net.SplitHostPort(srv.Addr)
	scp := "git@127.0.0.1:" + port + ":/" + repo.Name

	runAuthCases(t, []authCase{
		{"ssh://", url, &Auth{Identity: key.PrivatePEM, KnownHosts: srv.KnownHosts}, nil, ""},
		{"scp-like", scp, &Auth{Identity: key.PrivatePEM, KnownHosts: srv.KnownHosts}, nil, ""},
		{"encrypted key", url, &Auth{Identity: encKey.PrivatePEM, Passphrase: "key-pass", KnownHosts: srv.KnownHosts}, nil, ""},
		{"encrypted key, wrong passphrase", url, &Auth{Identity: encKey.PrivatePEM, Passphrase: "wrong-pw", KnownHosts: srv.KnownHosts}, ErrAuthentication, "Passphrase"},
		{"encrypted key, no passphrase", url, &Auth{Identity: encKey.PrivatePEM, KnownHosts: srv.KnownHosts}, ErrAuthentication, "no Passphrase"},
		{"unknown client key", url, &Auth{Identity: stranger.PrivatePEM, KnownHosts: srv.KnownHosts}, ErrAuthentication, "unable to authenticate"},
		{"no known_hosts", url, &Auth{Identity: key.PrivatePEM}, ErrAuthentication, "KnownHosts"},
		{"wrong host key", url, &Auth{Identity: key.PrivatePEM, KnownHosts: hostsFor(t, srv.Addr, other)}, ErrAuthentication, "key mismatch"},
		{"host not in known_hosts", url, &Auth{Identity: key.PrivatePEM, KnownHosts: other.KnownHosts}, ErrAuthentication, "knownhosts"},
		{"no auth", url, nil, ErrAuthentication, "Identity"},
		{"basic auth for ssh", url, &Auth{Username: "git", Password: "s3cret-pw"}, ErrAuthentication, "Identity"},
		{"missing repository", srv.RepoURL(&gitserver.Repo{Name: "nope"}), &Auth{Identity: key.PrivatePEM, KnownHosts: srv.KnownHosts}, ErrRepositoryNotFound, "nope"},
	}, sha)
	if n := srv.Execs.Load(); n == 0 {
		t.Fatal("the SSH server ran no git-upload-pack")
	}
}

// hostsFor is a known_hosts line that gives addr the host key of other.
func hostsFor(t *testing.T, addr string, other *gitserver.SSH) []byte {
	t.Helper()
	_, rest, _ := strings.Cut(strings.TrimSpace(string(other.KnownHosts)), " ")
	host, port, _ := net.SplitHostPort(addr)
	return []byte("[" + host + "]:" + port + " " + rest + "\n")
}

// TestSSHTimeout: a server that accepts TCP connections and never says a
// word must fail the Fetch within the Source's timeout (go-git alone would
// wait forever in the SSH handshake).
func TestSSHTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	key := gitserver.NewSSHKey(t, "")
	srv := gitserver.NewSSH(t, t.TempDir(), gitserver.SSHOptions{})
	// The guard is far longer than the timeout: if it ends the Fetch, the
	// SSH timeout did not work.
	guard, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	src := Source{
		URL:     "ssh://git@" + l.Addr().String() + "/repo",
		Auth:    &Auth{Identity: key.PrivatePEM, KnownHosts: hostsFor(t, l.Addr().String(), srv)},
		Timeout: 300 * time.Millisecond,
	}
	start := time.Now()
	_, err = NewFetcher(Options{CacheDir: t.TempDir(), Timeout: time.Hour}).Fetch(guard, src)
	t.Logf("silent SSH server: failed after %v (Source.Timeout %v): %v", time.Since(start), src.Timeout, err)
	if guard.Err() != nil {
		t.Fatalf("the Fetch ran into the guard deadline: %v", err)
	}
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("error %v, want ErrUnreachable", err)
	}
}

// TestSourceTimeoutOverridesOptions: Source.Timeout replaces
// Options.Timeout for HTTP too.
func TestSourceTimeoutOverridesOptions(t *testing.T) {
	guard, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	url := hangingServer(t)
	start := time.Now()
	_, err := NewFetcher(Options{CacheDir: t.TempDir(), Timeout: time.Hour}).Fetch(guard, Source{URL: url, Timeout: 200 * time.Millisecond})
	t.Logf("hanging HTTP server: failed after %v: %v", time.Since(start), err)
	if guard.Err() != nil || !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("error %v, want ErrUnreachable timed out after 200ms", err)
	}
}

func TestAuthFromSecret(t *testing.T) {
	key := gitserver.NewSSHKey(t, "")
	encKey := gitserver.NewSSHKey(t, "key-pass")
	srv := gitserver.NewHTTP(t, t.TempDir(), gitserver.HTTPOptions{TLS: true})
	kh := []byte("example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
	b := func(s string) []byte { return []byte(s) }
	cases := []struct {
		name  string
		data  map[string][]byte
		want  *Auth
		error string // substring; the key it names
	}{
		{"basic", map[string][]byte{"username": b("bot"), "password": b("s3cret-pw")}, &Auth{Username: "bot", Password: "s3cret-pw"}, ""},
		{"bearer", map[string][]byte{"bearerToken": b("tok-123\n")}, &Auth{BearerToken: "tok-123"}, ""},
		{"ca only", map[string][]byte{"ca.crt": srv.CAPEM}, &Auth{CAPEM: srv.CAPEM}, ""},
		{"legacy caFile", map[string][]byte{"caFile": srv.CAPEM, "username": b("bot"), "password": b("s3cret-pw")}, &Auth{Username: "bot", Password: "s3cret-pw", CAPEM: srv.CAPEM}, ""},
		{"ssh", map[string][]byte{"identity": key.PrivatePEM, "identity.pub": key.AuthorizedKey, "known_hosts": kh}, &Auth{Identity: key.PrivatePEM, KnownHosts: kh}, ""},
		{"ssh with passphrase", map[string][]byte{"identity": encKey.PrivatePEM, "password": b("key-pass"), "known_hosts": kh}, &Auth{Identity: encKey.PrivatePEM, Passphrase: "key-pass", KnownHosts: kh}, ""},
		{"username without password", map[string][]byte{"username": b("bot")}, nil, `"password" is missing`},
		{"password without username", map[string][]byte{"password": b("s3cret-pw")}, nil, `"username" is missing`},
		{"bearer with username", map[string][]byte{"bearerToken": b("tok-123"), "username": b("bot"), "password": b("s3cret-pw")}, nil, `"bearerToken" cannot be combined with "username"`},
		{"bearer with identity", map[string][]byte{"bearerToken": b("tok-123"), "identity": key.PrivatePEM, "known_hosts": kh}, nil, `"bearerToken" cannot be combined with "identity"`},
		{"identity without known_hosts", map[string][]byte{"identity": key.PrivatePEM}, nil, `"known_hosts" is required`},
		{"known_hosts without identity", map[string][]byte{"known_hosts": kh, "username": b("bot"), "password": b("s3cret-pw")}, nil, `"known_hosts" is set but "identity" is not`},
		{"bad identity", map[string][]byte{"identity": b("not a key"), "known_hosts": kh}, nil, `"identity" is not a PEM private key`},
		{"encrypted identity without password", map[string][]byte{"identity": encKey.PrivatePEM, "known_hosts": kh}, nil, `"identity" is encrypted`},
		{"encrypted identity, wrong password", map[string][]byte{"identity": encKey.PrivatePEM, "password": b("wrong-pw"), "known_hosts": kh}, nil, `cannot be decrypted with key "password"`},
		{"bad known_hosts", map[string][]byte{"identity": key.PrivatePEM, "known_hosts": b("tok-123 garbage")}, nil, `"known_hosts"`},
		{"bad ca.crt", map[string][]byte{"ca.crt": b("-----BEGIN CERTIFICATE-----\ntok123\n-----END CERTIFICATE-----\n")}, nil, `"ca.crt"`},
		{"ca.crt and caFile", map[string][]byte{"ca.crt": srv.CAPEM, "caFile": srv.CAPEM}, nil, `"caFile"`},
		{"ca with identity", map[string][]byte{"ca.crt": srv.CAPEM, "identity": key.PrivatePEM, "known_hosts": kh}, nil, `"ca.crt" applies to HTTPS`},
		{"empty", map[string][]byte{"other": b("x")}, nil, "none of the keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AuthFromSecret(tc.data)
			if tc.want != nil {
				if err != nil {
					t.Fatalf("AuthFromSecret: %v", err)
				}
				if got.fingerprint() != tc.want.fingerprint() {
					t.Fatalf("got %s %+v, want %+v", got, got, tc.want)
				}
				for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
					assertNoSecrets(t, "Auth "+format, fmt.Sprintf(format, got)+fmt.Sprintf(format, *got)+fmt.Sprintf(format, Source{Auth: got}))
				}
				return
			}
			if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("error %v, want ErrAuthentication mentioning %s", err, tc.error)
			}
			assertNoSecrets(t, "error", err.Error())
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error quotes the private key: %v", err)
			}
		})
	}
}
