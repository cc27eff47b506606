package source

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Auth holds the credentials for a Source. Which fields apply depends on
// the URL:
//
//   - http:// and https://: Username and Password (HTTP basic auth), or
//     BearerToken ("Authorization: Bearer <token>"), or neither; CAPEM adds
//     trusted CA certificates for https://.
//   - ssh:// and scp-like user@host:path: Identity (a PEM private key,
//     decrypted with Passphrase when it is encrypted) and KnownHosts, both
//     required; Username is the SSH user when the URL names none (else
//     "git").
//   - local paths and file:// URLs take no credentials.
//
// The field names follow Flux's GitRepository Secret keys; see
// [AuthFromSecret]. Credentials never appear in errors: String and errors
// name the kind of auth, the user and the key fingerprint only.
type Auth struct {
	// Username is the HTTP basic auth user, or the SSH user.
	Username string
	// Password is the HTTP basic auth password (requires Username).
	Password string
	// BearerToken is an HTTP bearer token (excludes Username and Password).
	BearerToken string
	// CAPEM holds PEM "CERTIFICATE" blocks trusted for https:// in addition
	// to the system roots.
	CAPEM []byte
	// Identity is a PEM private key (OpenSSH, PKCS#1, PKCS#8 or SEC 1) for
	// SSH public key auth.
	Identity []byte
	// Passphrase decrypts Identity when it is encrypted.
	Passphrase string
	// KnownHosts holds known_hosts lines (OpenSSH format, hashed host names
	// allowed); the SSH server's host key must match one of them.
	KnownHosts []byte
}

// String describes a without its secrets, e.g. `basic auth (user "bot")`,
// `bearer token`, `SSH key SHA256:… (user "git")`, `custom CA`. It has a
// value receiver so that printing an Auth or *Auth with %v or %+v never
// shows the secrets.
func (a Auth) String() string {
	var parts []string
	switch {
	case len(a.Identity) > 0:
		desc := "SSH key"
		if s, err := a.signer(); err == nil {
			desc += " " + ssh.FingerprintSHA256(s.PublicKey())
		}
		if a.Username != "" {
			desc += fmt.Sprintf(" (user %q)", a.Username)
		}
		parts = append(parts, desc)
	case a.BearerToken != "":
		parts = append(parts, "bearer token")
	case a.Username != "" || a.Password != "":
		parts = append(parts, fmt.Sprintf("basic auth (user %q)", a.Username))
	}
	if len(a.CAPEM) > 0 {
		parts = append(parts, "custom CA")
	}
	if len(parts) == 0 {
		return "empty auth"
	}
	return strings.Join(parts, ", ")
}

// GoString is String for %#v.
func (a Auth) GoString() string { return "gitops.Auth{" + a.String() + "}" }

// AuthFromSecret builds an Auth from the data of a Flux-style Git
// credentials Secret (source.toolkit.fluxcd.io GitRepository
// spec.secretRef). Recognised keys:
//
//	username, password  HTTP basic auth; with identity, password is its passphrase
//	bearerToken         HTTP bearer token
//	identity            PEM private key for SSH (identity.pub is ignored)
//	known_hosts         known_hosts lines; required with identity
//	ca.crt (or caFile)  PEM CA certificates for HTTPS
//
// Other keys are ignored. It returns an error wrapping ErrAuthentication
// and naming the offending key when the set is incomplete or contradictory
// (username without password or the reverse, bearerToken with username or
// password or identity, identity without known_hosts, known_hosts or
// ca.crt with the wrong kind of auth, ca.crt and caFile both set, none of
// the keys set) or a value does not parse (identity, known_hosts, ca.crt).
// Secret values are never part of the message.
func AuthFromSecret(data map[string][]byte) (*Auth, error) {
	fail := func(format string, args ...any) (*Auth, error) {
		return nil, fmt.Errorf("%w: auth secret: %s", ErrAuthentication, fmt.Sprintf(format, args...))
	}
	has := func(k string) bool { return len(data[k]) > 0 }
	a := &Auth{
		Username:    string(data["username"]),
		BearerToken: strings.TrimSpace(string(data["bearerToken"])),
		Identity:    data["identity"],
		KnownHosts:  data["known_hosts"],
	}
	switch {
	case has("ca.crt") && has("caFile"):
		return fail(`keys "ca.crt" and "caFile" are both set; set only "ca.crt"`)
	case has("ca.crt"):
		a.CAPEM = data["ca.crt"]
	case has("caFile"):
		a.CAPEM = data["caFile"]
	}
	caKey := "ca.crt"
	if has("caFile") {
		caKey = "caFile"
	}

	if has("identity") {
		a.Passphrase = string(data["password"])
		switch {
		case has("bearerToken"):
			return fail(`key "bearerToken" cannot be combined with "identity" (SSH)`)
		case !has("known_hosts"):
			return fail(`key "known_hosts" is required with "identity": SSH needs the server's host key`)
		case len(a.CAPEM) > 0:
			return fail(`key %q applies to HTTPS and cannot be combined with "identity" (SSH)`, caKey)
		}
	} else {
		a.Password = string(data["password"])
		switch {
		case has("known_hosts"):
			return fail(`key "known_hosts" is set but "identity" is not; known_hosts applies to SSH only`)
		case has("bearerToken") && (has("username") || has("password")):
			return fail(`key "bearerToken" cannot be combined with "username"/"password"; use one kind of HTTP auth`)
		case has("username") && !has("password"):
			return fail(`key "username" is set but "password" is missing`)
		case has("password") && !has("username"):
			return fail(`key "password" is set but "username" is missing`)
		case !has("username") && !has("bearerToken") && len(a.CAPEM) == 0:
			return fail(`none of the keys "username"+"password", "bearerToken", "identity"+"known_hosts" or "ca.crt" is set`)
		}
	}
	if err := a.check(); err != nil {
		return fail("%s", secretKeyNames.Replace(err.Error()))
	}
	return a, nil
}

// secretKeyNames rewrites the field names in check's messages to the
// Secret keys they come from.
var secretKeyNames = strings.NewReplacer(
	"Identity", `key "identity"`, "KnownHosts", `key "known_hosts"`, "CAPEM", `key "ca.crt"`,
	"Passphrase", `key "password"`,
)

// check parses the fields that hold structured data. Its messages name the
// field and never quote its content.
func (a *Auth) check() error {
	if len(a.CAPEM) > 0 {
		if err := checkCAPEM(a.CAPEM); err != nil {
			return fmt.Errorf("CAPEM: %w", err)
		}
	}
	if len(a.Identity) > 0 {
		if _, err := a.signer(); err != nil {
			return err
		}
	}
	if len(a.KnownHosts) > 0 {
		if _, err := parseKnownHosts(a.KnownHosts); err != nil {
			return fmt.Errorf("KnownHosts: %w", err)
		}
	}
	return nil
}

// validateFor checks that a fits an endpoint of the given kind. Errors wrap
// ErrAuthentication and name the Auth fields.
func (a *Auth) validateFor(kind endpointKind, display string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrAuthentication, fmt.Sprintf(format, args...))
	}
	if a == nil {
		if kind == kindSSH {
			return fail("SSH URL %s needs Auth with Identity and KnownHosts (Secret keys identity and known_hosts)", display)
		}
		return nil
	}
	switch kind {
	case kindLocal:
		return fail("local repository %s takes no Auth (got %s)", display, a)
	case kindSSH:
		switch {
		case len(a.Identity) == 0:
			return fail("SSH URL %s needs Auth.Identity, a private key (Secret key identity); got %s", display, a)
		case len(a.KnownHosts) == 0:
			return fail("SSH URL %s needs Auth.KnownHosts (Secret key known_hosts): refusing to connect to a server whose host key is not known", display)
		case a.BearerToken != "" || a.Password != "":
			return fail("SSH URL %s takes no BearerToken or Password (use Passphrase for an encrypted Identity)", display)
		case len(a.CAPEM) > 0:
			return fail("SSH URL %s takes no CAPEM (it applies to HTTPS)", display)
		}
	case kindHTTP:
		switch {
		case len(a.Identity) > 0 || len(a.KnownHosts) > 0:
			return fail("HTTP(S) URL %s takes no SSH Identity or KnownHosts; use an ssh:// URL for SSH auth", display)
		case a.BearerToken != "" && (a.Username != "" || a.Password != ""):
			return fail("HTTP(S) URL %s: set BearerToken or Username/Password, not both", display)
		case a.Username != "" && a.Password == "":
			return fail("HTTP(S) URL %s: Username %q is set without Password", display, a.Username)
		case a.Password != "" && a.Username == "":
			return fail("HTTP(S) URL %s: Password is set without Username", display)
		}
	}
	if err := a.check(); err != nil {
		return fail("%v", err)
	}
	return nil
}

// fingerprint is a one-way digest of the credentials, mixed into the cache
// key so that sources with different credentials never share a clone ("" for
// nil).
func (a *Auth) fingerprint() string {
	if a == nil {
		return ""
	}
	h := sha256.New()
	for _, f := range [][]byte{[]byte(a.Username), []byte(a.Password), []byte(a.BearerToken), a.CAPEM, a.Identity, []byte(a.Passphrase), a.KnownHosts} {
		fmt.Fprintf(h, "%d:", len(f))
		h.Write(f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// signers memoises parsed identities by a digest of Identity and
// Passphrase: decrypting a bcrypt-protected key takes a quarter second.
var signers sync.Map // [32]byte -> ssh.Signer

// signer parses Identity, with Passphrase if it is encrypted.
func (a *Auth) signer() (ssh.Signer, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%d:", len(a.Identity))
	h.Write(a.Identity)
	h.Write([]byte(a.Passphrase))
	var key [32]byte
	copy(key[:], h.Sum(nil))
	if s, ok := signers.Load(key); ok {
		return s.(ssh.Signer), nil
	}
	s, err := a.parseIdentity()
	if err == nil {
		signers.Store(key, s)
	}
	return s, err
}

func (a *Auth) parseIdentity() (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(a.Identity)
	var missing *ssh.PassphraseMissingError
	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &missing):
		if a.Passphrase == "" {
			return nil, errors.New("Identity is encrypted and no Passphrase is given")
		}
		s, err = ssh.ParsePrivateKeyWithPassphrase(a.Identity, []byte(a.Passphrase))
		if err != nil {
			return nil, fmt.Errorf("Identity cannot be decrypted with Passphrase: %w", err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("Identity is not a PEM private key: %w", err)
	}
}

// checkCAPEM reports whether b holds at least one parsable certificate and
// nothing but certificates.
func checkCAPEM(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %q is not a CERTIFICATE", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM CERTIFICATE block")
	}
	return nil
}
