package source

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// VerifyMode says which signatures a [Verification] requires; the values
// are those of Flux's GitRepository spec.verify.mode.
type VerifyMode string

const (
	// VerifyHEAD requires a valid signature on the checked-out commit.
	VerifyHEAD VerifyMode = "HEAD"
	// VerifyTag requires a valid signature on the annotated tag the ref
	// names (Tag or SemVer refs only; lightweight tags are refused).
	VerifyTag VerifyMode = "Tag"
	// VerifyTagAndHEAD requires both.
	VerifyTagAndHEAD VerifyMode = "TagAndHEAD"
)

// sshNamespace is the namespace git uses for SSH signatures (gpg.format=ssh).
const sshNamespace = "git"

// Verification is what Source.Verify requires of the fetched revision:
// signatures made by one of the trusted keys. Build it with
// [VerificationFromSecret] or directly.
type Verification struct {
	// Mode selects what must be signed; empty means VerifyHEAD.
	Mode VerifyMode
	// OpenPGPKeys maps a name (the Secret key, e.g. "alice.asc") to an
	// ASCII-armored OpenPGP public key ring. Verified with go-git's
	// Commit.Verify / Tag.Verify (github.com/ProtonMail/go-crypto).
	OpenPGPKeys map[string][]byte
	// SSHKeys maps a name ("bob.pub") to one or more SSH public keys in
	// authorized_keys format. Signatures made with git's gpg.format=ssh
	// ("-----BEGIN SSH SIGNATURE-----", namespace "git") are verified with
	// github.com/hiddeco/sshsig, as Flux does.
	SSHKeys map[string][]byte
}

// VerificationFromSecret builds a Verification from mode ("HEAD", "Tag",
// "TagAndHEAD", case-insensitive; "" means HEAD) and the data of a Secret
// whose keys name public keys: a key ending in ".asc" holds an armored
// OpenPGP public key ring, a key ending in ".pub" holds authorized_keys
// lines. It returns an error wrapping ErrVerification, naming the Secret
// key, when the mode is unknown, a key has another suffix or does not
// parse, or there are no keys.
func VerificationFromSecret(mode string, data map[string][]byte) (*Verification, error) {
	v := &Verification{}
	switch strings.ToLower(mode) {
	case "", "head":
		v.Mode = VerifyHEAD
	case "tag":
		v.Mode = VerifyTag
	case "tagandhead":
		v.Mode = VerifyTagAndHEAD
	default:
		return nil, fmt.Errorf("%w: verification mode %q: want HEAD, Tag or TagAndHEAD", ErrVerification, mode)
	}
	for _, name := range slices.Sorted(maps.Keys(data)) {
		switch {
		case strings.HasSuffix(name, ".asc"):
			if v.OpenPGPKeys == nil {
				v.OpenPGPKeys = map[string][]byte{}
			}
			v.OpenPGPKeys[name] = data[name]
		case strings.HasSuffix(name, ".pub"):
			if v.SSHKeys == nil {
				v.SSHKeys = map[string][]byte{}
			}
			v.SSHKeys[name] = data[name]
		default:
			return nil, fmt.Errorf("%w: verification secret key %q: want a name ending in .asc (armored OpenPGP public key) or .pub (SSH public keys)", ErrVerification, name)
		}
	}
	if _, err := v.keys(); err != nil {
		return nil, err
	}
	return v, nil
}

// validateFor checks the mode against the ref; nil v is valid.
func (v *Verification) validateFor(ref Ref) error {
	if v == nil {
		return nil
	}
	switch v.Mode {
	case "", VerifyHEAD:
	case VerifyTag, VerifyTagAndHEAD:
		if ref.Tag == "" && ref.SemVer == "" {
			return fmt.Errorf("%w: verification mode %s needs a tag or semver ref, got %s", ErrVerification, v.Mode, ref)
		}
	default:
		return fmt.Errorf("%w: verification mode %q: want HEAD, Tag or TagAndHEAD", ErrVerification, v.Mode)
	}
	return nil
}

// pgpKey is one trusted OpenPGP key ring.
type pgpKey struct {
	name    string
	armored string
	ids     map[uint64]bool // primary keys and subkeys
	primary []string        // primary key ids, for messages
}

// sshKey is one trusted SSH public key.
type sshKey struct {
	name string
	pub  ssh.PublicKey
	fp   string
}

type trustedKeys struct {
	pgp []pgpKey
	ssh []sshKey
}

// keys parses the trusted keys. Errors wrap ErrVerification and name the key.
func (v *Verification) keys() (trustedKeys, error) {
	var k trustedKeys
	for _, name := range slices.Sorted(maps.Keys(v.OpenPGPKeys)) {
		el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(v.OpenPGPKeys[name]))
		if err != nil {
			return k, fmt.Errorf("%w: OpenPGP key %q is not an armored public key ring: %w", ErrVerification, name, err)
		}
		pk := pgpKey{name: name, armored: string(v.OpenPGPKeys[name]), ids: map[uint64]bool{}}
		for _, e := range el {
			pk.ids[e.PrimaryKey.KeyId] = true
			pk.primary = append(pk.primary, e.PrimaryKey.KeyIdString())
			for _, s := range e.Subkeys {
				pk.ids[s.PublicKey.KeyId] = true
			}
		}
		k.pgp = append(k.pgp, pk)
	}
	for _, name := range slices.Sorted(maps.Keys(v.SSHKeys)) {
		rest := v.SSHKeys[name]
		n := 0
		for len(bytes.TrimSpace(rest)) > 0 {
			pub, _, _, next, err := ssh.ParseAuthorizedKey(rest)
			if err != nil {
				return k, fmt.Errorf("%w: SSH key %q, entry %d: not an authorized_keys line: %w", ErrVerification, name, n+1, err)
			}
			k.ssh = append(k.ssh, sshKey{name: name, pub: pub, fp: ssh.FingerprintSHA256(pub)})
			rest = next
			n++
		}
		if n == 0 {
			return k, fmt.Errorf("%w: SSH key %q holds no public key", ErrVerification, name)
		}
	}
	if len(k.pgp) == 0 && len(k.ssh) == 0 {
		return k, fmt.Errorf("%w: no trusted keys (want Secret keys ending in .asc or .pub)", ErrVerification)
	}
	return k, nil
}

// describe lists the trusted keys for an error message.
func (k trustedKeys) describe() string {
	var parts []string
	for _, p := range k.pgp {
		parts = append(parts, fmt.Sprintf("OpenPGP %s (%s)", strings.Join(p.primary, ","), p.name))
	}
	for _, s := range k.ssh {
		parts = append(parts, fmt.Sprintf("SSH %s (%s)", s.fp, s.name))
	}
	return strings.Join(parts, ", ")
}

// signedObject is a commit or tag to verify.
type signedObject struct {
	what      string // `commit <sha>` or `tag "v1" (<sha>)`
	signature string
	encode    func(plumbing.EncodedObject) error // the signed payload
	pgpVerify func(armoredKeyRing string) (*openpgp.Entity, error)
}

// check verifies o's signature against k and returns "<what> by <key>".
func (k trustedKeys) check(o signedObject) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s %s", ErrVerification, o.what, fmt.Sprintf(format, args...))
	}
	sig := strings.TrimSpace(o.signature)
	switch {
	case sig == "":
		return fail("is not signed (trusted keys: %s)", k.describe())
	case strings.HasPrefix(sig, "-----BEGIN PGP SIGNATURE-----"):
		issuer, err := pgpIssuer(sig)
		if err != nil {
			return fail("has an unreadable OpenPGP signature: %v", err)
		}
		var tried []string
		for _, key := range k.pgp {
			if !key.ids[issuer] {
				continue
			}
			if _, err := o.pgpVerify(key.armored); err != nil {
				tried = append(tried, fmt.Sprintf("%s: %v", key.name, err))
				continue
			}
			return fmt.Sprintf("%s by OpenPGP key %016X (%s)", o.what, issuer, key.name), nil
		}
		if len(tried) > 0 {
			return fail("has an invalid OpenPGP signature by key %016X (%s)", issuer, strings.Join(tried, "; "))
		}
		return fail("is signed by OpenPGP key %016X, which is not trusted (trusted keys: %s)", issuer, k.describe())
	case strings.HasPrefix(sig, "-----BEGIN SSH SIGNATURE-----"):
		s, err := sshsig.Unarmor([]byte(sig))
		if err != nil {
			return fail("has an unreadable SSH signature: %v", err)
		}
		fp := ssh.FingerprintSHA256(s.PublicKey)
		payload := &plumbing.MemoryObject{}
		if err := o.encode(payload); err != nil {
			return "", fmt.Errorf("encode %s: %w", o.what, err)
		}
		for _, key := range k.ssh {
			if key.fp != fp {
				continue
			}
			r, err := payload.Reader()
			if err != nil {
				return "", err
			}
			if err := sshsig.Verify(r, s, key.pub, s.HashAlgorithm, sshNamespace); err != nil {
				return fail("has an invalid SSH signature by key %s (%s): %v", fp, key.name, err)
			}
			return fmt.Sprintf("%s by SSH key %s (%s)", o.what, fp, key.name), nil
		}
		return fail("is signed by SSH key %s, which is not trusted (trusted keys: %s)", fp, k.describe())
	default:
		first, _, _ := strings.Cut(sig, "\n")
		return fail("has a signature of an unsupported kind (%s); want OpenPGP or SSH", first)
	}
}

// pgpIssuer returns the key id that made an armored OpenPGP signature.
func pgpIssuer(armored string) (uint64, error) {
	block, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return 0, err
	}
	p, err := packet.NewReader(block.Body).Next()
	if err != nil {
		return 0, err
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return 0, fmt.Errorf("first packet is a %T, not a signature", p)
	}
	switch {
	case sig.IssuerKeyId != nil:
		return *sig.IssuerKeyId, nil
	case len(sig.IssuerFingerprint) >= 8:
		fp := sig.IssuerFingerprint
		var id uint64
		for _, b := range fp[len(fp)-8:] {
			id = id<<8 | uint64(b)
		}
		return id, nil
	}
	return 0, errors.New("the signature names no issuer key")
}

// verify checks the signatures v requires on the resolved revision and
// returns what was verified (see Artifact.Verified); "" for nil v.
func (c *cache) verify(res resolved, ref Ref, v *Verification) (string, error) {
	if v == nil {
		return "", nil
	}
	keys, err := v.keys()
	if err != nil {
		return "", err
	}
	repo, err := git.PlainOpen(c.repoDir())
	if err != nil {
		return "", fmt.Errorf("open cached clone: %w", err)
	}
	var done []string
	if v.Mode == VerifyTag || v.Mode == VerifyTagAndHEAD {
		tag, err := repo.TagObject(res.tag)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return "", fmt.Errorf("%w: tag %q is a lightweight tag; verification mode %s needs an annotated (signed) tag", ErrVerification, res.short, v.Mode)
		}
		if err != nil {
			return "", fmt.Errorf("read tag %q: %w", res.short, err)
		}
		d, err := keys.check(signedObject{
			what:      fmt.Sprintf("tag %q (%s)", res.short, tag.Hash),
			signature: tag.PGPSignature,
			encode:    tag.EncodeWithoutSignature,
			pgpVerify: tag.Verify,
		})
		if err != nil {
			return "", err
		}
		done = append(done, d)
	}
	if v.Mode == "" || v.Mode == VerifyHEAD || v.Mode == VerifyTagAndHEAD {
		cm, err := repo.CommitObject(res.commit)
		if err != nil {
			return "", fmt.Errorf("read commit %s: %w", res.commit, err)
		}
		d, err := keys.check(signedObject{
			what:      "commit " + cm.Hash.String(),
			signature: cm.PGPSignature,
			encode:    cm.EncodeWithoutSignature,
			pgpVerify: cm.Verify,
		})
		if err != nil {
			return "", err
		}
		done = append(done, d)
	}
	return strings.Join(done, "; "), nil
}
