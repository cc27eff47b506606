package gitserver

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// GPGKey is an OpenPGP signing key made with the real gpg, for signed
// commits and tags in tests.
type GPGKey struct {
	// Fingerprint is the 40-hex-digit fingerprint (git's user.signingkey).
	Fingerprint string
	// KeyID is its last 16 hex digits, as verification messages name it.
	KeyID string
	// Armored is the exported public key (a Secret's *.asc value).
	Armored []byte
}

// NewGPGHome makes a GNUPGHOME for the test, sets it in the environment
// (git runs gpg with it) and stops its gpg-agent at the end. It lives in
// os.TempDir, not t.TempDir: the agent's socket path length is limited.
func NewGPGHome(t testing.TB) string {
	t.Helper()
	home, err := os.MkdirTemp("", "gpg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GNUPGHOME", home)
	t.Cleanup(func() {
		_ = exec.Command("gpgconf", "--homedir", home, "--kill", "gpg-agent").Run()
		os.RemoveAll(home)
	})
	return home
}

// NewGPGKey makes an ed25519 signing key for uid (e.g. "Alice
// <alice@example.com>") in home; it fails the test when gpg does.
func NewGPGKey(t testing.TB, home, uid string) GPGKey {
	t.Helper()
	gpg := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("gpg", append([]string{"--homedir", home}, args...)...)
		cmd.Env = append(os.Environ(), Env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gpg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gpg("--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
	var k GPGKey
	for _, line := range strings.Split(gpg("--with-colons", "--list-keys", uid), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && k.Fingerprint == "" {
			k.Fingerprint = f[9]
		}
	}
	if len(k.Fingerprint) != 40 {
		t.Fatalf("gpg: no fingerprint for %s", uid)
	}
	k.KeyID = k.Fingerprint[24:]
	k.Armored = []byte(gpg("--armor", "--export", k.Fingerprint))
	return k
}
