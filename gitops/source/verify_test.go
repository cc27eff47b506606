package source

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-dev/converge/internal/testing/gitserver"
	"golang.org/x/crypto/ssh"
)

func runCmd(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), gitserver.Env...), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newSigningSSHKey makes an ed25519 key file with ssh-keygen and returns its
// path and authorized_keys line.
func newSigningSSHKey(t *testing.T, dir, name string) (path string, pub []byte) {
	t.Helper()
	path = filepath.Join(dir, name)
	runCmd(t, dir, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path)
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return path, pub
}

func pgpSigning(k gitserver.GPGKey) []string {
	return []string{"-c", "gpg.program=gpg", "-c", "user.signingkey=" + k.Fingerprint}
}

func sshSigning(keyFile string) []string {
	return []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + keyFile}
}

// signedRepo is a repository whose branches and tags are signed in
// different ways:
//
//	main        unsigned commit
//	pgp         commit signed by alice (OpenPGP, trusted)
//	ssh         commit signed by bob (SSH, trusted)
//	pgp-unknown commit signed by mallory (OpenPGP, not trusted)
//	ssh-unknown commit signed by eve (SSH, not trusted)
//	v1.0.0      annotated tag signed by bob (SSH) on main
//	v1.1.0      annotated tag signed by alice (OpenPGP) on pgp
//	v0.9.0      annotated unsigned tag on pgp
//	light       lightweight tag on pgp
//	v1.2.0      annotated tag signed by eve (SSH, not trusted) on ssh
//	forged-pgp, forged-ssh: the signature of pgp / ssh on another message
type signedRepo struct {
	url     string
	commits map[string]string // branch -> commit
	alice   gitserver.GPGKey
	mallory gitserver.GPGKey
	bobPub  []byte
	evePub  []byte
}

func newSignedRepo(t *testing.T) *signedRepo {
	t.Helper()
	home := gitserver.NewGPGHome(t)
	keys := t.TempDir()
	s := &signedRepo{commits: map[string]string{}}
	s.alice = gitserver.NewGPGKey(t, home, "Alice <alice@example.com>")
	s.mallory = gitserver.NewGPGKey(t, home, "Mallory <mallory@example.com>")
	bob, bobPub := newSigningSSHKey(t, keys, "bob")
	eve, evePub := newSigningSSHKey(t, keys, "eve")
	s.bobPub, s.evePub = bobPub, evePub

	root := t.TempDir()
	repo := gitserver.NewRepo(t, root, "cfg", "main")
	s.commits["main"] = repo.Commit(t, "unsigned", map[string]string{"a.yaml": "main\n"})
	for _, b := range []struct {
		name string
		sign []string
	}{
		{"pgp", pgpSigning(s.alice)},
		{"ssh", sshSigning(bob)},
		{"pgp-unknown", pgpSigning(s.mallory)},
		{"ssh-unknown", sshSigning(eve)},
	} {
		gitserver.Git(t, repo.Dir, "checkout", "-q", "-b", b.name, "main")
		if err := os.WriteFile(filepath.Join(repo.Dir, "a.yaml"), []byte(b.name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitserver.Git(t, repo.Dir, "add", "-A")
		gitserver.Git(t, repo.Dir, append(b.sign, "commit", "-q", "-S", "-m", b.name)...)
		s.commits[b.name] = gitserver.Git(t, repo.Dir, "rev-parse", "HEAD")
	}
	gitserver.Git(t, repo.Dir, "checkout", "-q", "main")
	// Forgeries: a trusted signature copied onto a commit with another
	// message.
	for _, b := range []string{"pgp", "ssh"} {
		raw := gitserver.Git(t, repo.Dir, "cat-file", "commit", s.commits[b])
		forged := strings.TrimSuffix(raw, b) + "forged\n"
		file := filepath.Join(keys, "forged-"+b)
		if err := os.WriteFile(file, []byte(forged), 0o644); err != nil {
			t.Fatal(err)
		}
		sha := gitserver.Git(t, repo.Dir, "hash-object", "-t", "commit", "-w", file)
		gitserver.Git(t, repo.Dir, "branch", "forged-"+b, sha)
		s.commits["forged-"+b] = sha
	}
	gitserver.Git(t, repo.Dir, append(sshSigning(bob), "tag", "-s", "-m", "v1.0.0", "v1.0.0", "main")...)
	gitserver.Git(t, repo.Dir, append(pgpSigning(s.alice), "tag", "-s", "-m", "v1.1.0", "v1.1.0", "pgp")...)
	gitserver.Git(t, repo.Dir, "tag", "-a", "-m", "v0.9.0", "v0.9.0", "pgp")
	gitserver.Git(t, repo.Dir, "tag", "light", "pgp")
	gitserver.Git(t, repo.Dir, append(sshSigning(eve), "tag", "-s", "-m", "v1.2.0", "v1.2.0", "ssh")...)
	s.url = gitserver.NewHTTP(t, root, gitserver.HTTPOptions{}).RepoURL(repo)
	return s
}

func TestVerify(t *testing.T) {
	s := newSignedRepo(t)
	trusted := map[string][]byte{"alice.asc": s.alice.Armored, "bob.pub": s.bobPub}
	mode := func(m string) *Verification {
		v, err := VerificationFromSecret(m, trusted)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	bobFP := fingerprintOf(t, s.bobPub)
	eveFP := fingerprintOf(t, s.evePub)

	cases := []struct {
		name   string
		ref    Ref
		verify *Verification
		// ok: Verified must contain all of want; else the error must.
		ok   bool
		want []string
	}{
		{"OpenPGP-signed HEAD", Ref{Branch: "pgp"}, mode("HEAD"), true,
			[]string{"commit " + s.commits["pgp"], "OpenPGP key " + s.alice.KeyID, "alice.asc"}},
		{"SSH-signed HEAD", Ref{Branch: "ssh"}, mode("head"), true,
			[]string{"commit " + s.commits["ssh"], "SSH key " + bobFP, "bob.pub"}},
		{"unsigned HEAD", Ref{Branch: "main"}, mode("HEAD"), false,
			[]string{"commit " + s.commits["main"], "is not signed", s.alice.KeyID, bobFP}},
		{"unknown OpenPGP key", Ref{Branch: "pgp-unknown"}, mode("HEAD"), false,
			[]string{"commit " + s.commits["pgp-unknown"], "OpenPGP key " + s.mallory.KeyID, "not trusted", s.alice.KeyID + " (alice.asc)"}},
		{"unknown SSH key", Ref{Branch: "ssh-unknown"}, mode("HEAD"), false,
			[]string{"commit " + s.commits["ssh-unknown"], "SSH key " + eveFP, "not trusted", bobFP + " (bob.pub)"}},
		{"forged OpenPGP signature", Ref{Branch: "forged-pgp"}, mode("HEAD"), false,
			[]string{"commit " + s.commits["forged-pgp"], "invalid OpenPGP signature by key " + s.alice.KeyID}},
		{"forged SSH signature", Ref{Branch: "forged-ssh"}, mode("HEAD"), false,
			[]string{"commit " + s.commits["forged-ssh"], "invalid SSH signature by key " + bobFP}},
		{"commit ref", Ref{Commit: s.commits["ssh"]}, mode("HEAD"), true, []string{"commit " + s.commits["ssh"]}},
		{"SSH-signed tag", Ref{Tag: "v1.0.0"}, mode("Tag"), true, []string{`tag "v1.0.0"`, "SSH key " + bobFP}},
		{"OpenPGP-signed tag and HEAD", Ref{Tag: "v1.1.0"}, mode("TagAndHEAD"), true,
			[]string{`tag "v1.1.0"`, "commit " + s.commits["pgp"], "OpenPGP key " + s.alice.KeyID}},
		{"signed tag, unsigned HEAD", Ref{Tag: "v1.0.0"}, mode("TagAndHEAD"), false,
			[]string{"commit " + s.commits["main"], "is not signed"}},
		{"unsigned annotated tag", Ref{Tag: "v0.9.0"}, mode("Tag"), false, []string{`tag "v0.9.0"`, "is not signed"}},
		{"lightweight tag", Ref{Tag: "light"}, mode("Tag"), false, []string{`tag "light"`, "lightweight", "annotated"}},
		{"tag signed by unknown key", Ref{Tag: "v1.2.0"}, mode("Tag"), false, []string{`tag "v1.2.0"`, eveFP, "not trusted"}},
		{"semver picks a tag, Tag mode", Ref{SemVer: "~1.1"}, mode("Tag"), true, []string{`tag "v1.1.0"`}},
		{"Tag mode on a branch", Ref{Branch: "pgp"}, mode("Tag"), false, []string{"needs a tag or semver ref", `branch "pgp"`}},
		{"only OpenPGP keys for an SSH signature", Ref{Branch: "ssh"}, &Verification{OpenPGPKeys: map[string][]byte{"alice.asc": s.alice.Armored}}, false,
			[]string{"SSH key " + bobFP, "not trusted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cacheDir := t.TempDir()
			a, err := NewFetcher(Options{CacheDir: cacheDir}).Fetch(t.Context(), Source{URL: s.url, Ref: tc.ref, Verify: tc.verify})
			if tc.ok {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(a.Verified, w) {
						t.Errorf("Verified %q does not mention %q", a.Verified, w)
					}
				}
				t.Logf("Verified: %s", a.Verified)
				return
			}
			if !errors.Is(err, ErrVerification) {
				t.Fatalf("error %v, want ErrVerification", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			t.Logf("error: %v", err)
			if a != (Artifact{}) {
				t.Errorf("failed verification returned an Artifact: %+v", a)
			}
			// The unverified revision was not checked out.
			wts, _ := filepath.Glob(filepath.Join(cacheDir, "*", "worktrees", "*"))
			if len(wts) != 0 {
				t.Errorf("work trees were written for an unverified revision: %v", wts)
			}
		})
	}
}

func fingerprintOf(t *testing.T, authorizedKey []byte) string {
	t.Helper()
	pub, _, _, _, err := ssh.ParseAuthorizedKey(authorizedKey)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(pub)
}

func TestVerificationFromSecret(t *testing.T) {
	key := gitserver.NewSSHKey(t, "")
	cases := []struct {
		name string
		mode string
		data map[string][]byte
		want VerifyMode
		err  string
	}{
		{"default mode", "", map[string][]byte{"a.pub": key.AuthorizedKey}, VerifyHEAD, ""},
		{"TagAndHEAD", "TagAndHEAD", map[string][]byte{"a.pub": key.AuthorizedKey}, VerifyTagAndHEAD, ""},
		{"bad mode", "sometimes", map[string][]byte{"a.pub": key.AuthorizedKey}, "", `mode "sometimes"`},
		{"bad suffix", "HEAD", map[string][]byte{"a.pub": key.AuthorizedKey, "notes.txt": []byte("x")}, "", `"notes.txt"`},
		{"bad armor", "HEAD", map[string][]byte{"a.asc": []byte("not armored")}, "", `"a.asc"`},
		{"bad ssh key", "HEAD", map[string][]byte{"b.pub": []byte("ssh-ed25519 ???")}, "", `"b.pub"`},
		{"empty ssh key", "HEAD", map[string][]byte{"b.pub": []byte("\n")}, "", `"b.pub" holds no public key`},
		{"no keys", "HEAD", map[string][]byte{}, "", "no trusted keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := VerificationFromSecret(tc.mode, tc.data)
			if tc.err == "" {
				if err != nil || v.Mode != tc.want {
					t.Fatalf("got %+v, %v; want mode %s", v, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrVerification) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want ErrVerification mentioning %s", err, tc.err)
			}
		})
	}
}
