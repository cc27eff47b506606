package uploadtoken

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Operation is what a token allows, CDI's token.Operation.
type Operation string

const (
	// OperationUpload allows one upload into the token's PVC (CDI's
	// token.OperationUpload).
	OperationUpload Operation = "Upload"
	// OperationClone allows cloning the token's PVC (Name, Namespace)
	// into the DataVolume its Params name (CDI's token.OperationClone).
	OperationClone Operation = "Clone"
	// TokenIssuer is the token's iss claim (CDI's is "cdi-apiserver").
	TokenIssuer = "converge-controller"
)

// GroupVersionResource is the resource the token's name refers to, in
// CDI's payload shape (metav1.GroupVersionResource's JSON).
type GroupVersionResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

// PVCResource is the Resource of an upload token: core/v1
// persistentvolumeclaims, as CDI's apiserver writes it.
var PVCResource = GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

// Claims are a token's payload: CDI's token.Payload fields (pkg/token in
// kubevirt/containerized-data-importer) plus the expiry and issue time.
type Claims struct {
	// Operation is OperationUpload for upload tokens.
	Operation Operation `json:"operation"`
	// Name is the PVC (and DataVolume) name.
	Name string `json:"name"`
	// Namespace is the PVC's namespace.
	Namespace string `json:"namespace"`
	// Resource is PVCResource.
	Resource GroupVersionResource `json:"resource"`
	// Params are CDI's payload params: for OperationClone the target
	// (ParamTargetNamespace, ParamTargetName) and, in an extended token,
	// the target DataVolume's UID (ParamUID).
	Params map[string]string `json:"params,omitempty"`
	// IssuedAt and Expiry bound the token's validity (second precision).
	IssuedAt, Expiry time.Time `json:"-"`
}

// Sign gives the compact JWS of c signed ES256 with key; c.Expiry must be
// after c.IssuedAt.
func Sign(key *ecdsa.PrivateKey, c Claims) (string, error) {
	if !c.Expiry.After(c.IssuedAt) {
		return "", fmt.Errorf("upload token for %s/%s: expiry %v is not after issue time %v", c.Namespace, c.Name, c.Expiry, c.IssuedAt)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("upload token for %s/%s: %w", c.Namespace, c.Name, err)
	}
	std := jwt.Claims{Issuer: TokenIssuer, IssuedAt: jwt.NewNumericDate(c.IssuedAt), NotBefore: jwt.NewNumericDate(c.IssuedAt),
		Expiry: jwt.NewNumericDate(c.Expiry)}
	s, err := jwt.Signed(sig).Claims(std).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("upload token for %s/%s: %w", c.Namespace, c.Name, err)
	}
	return s, nil
}

// Token verification failures, for errors.Is.
var (
	// ErrMalformed: not a compact JWS of an ES256 JWT.
	ErrMalformed = errors.New("malformed token")
	// ErrSignature: no given public key verifies the signature (a forged
	// token, or one signed with a key no longer published).
	ErrSignature = errors.New("token signature does not verify with any published key")
	// ErrExpired: outside its validity window (exp, nbf) or with another
	// issuer.
	ErrExpired = errors.New("token expired or not yet valid")
)

// leeway is the clock skew tolerated between issuer and verifier.
const leeway = 5 * time.Second

// Verify checks token's signature against keys (any one may match: the
// ConfigMap lists the current key and older ones), its issuer and its
// validity at now, and gives its Claims. Errors wrap ErrMalformed,
// ErrSignature or ErrExpired. The operation and the target are the
// caller's to check.
func Verify(token string, keys []*ecdsa.PublicKey, now time.Time) (Claims, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var std jwt.Claims
	var c Claims
	verified := false
	for _, k := range keys {
		if err := tok.Claims(k, &std, &c); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Claims{}, ErrSignature
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: TokenIssuer, Time: now}, leeway); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrExpired, err)
	}
	if std.IssuedAt != nil {
		c.IssuedAt = std.IssuedAt.Time()
	}
	if std.Expiry == nil {
		return Claims{}, fmt.Errorf("%w: no exp claim", ErrExpired)
	}
	c.Expiry = std.Expiry.Time()
	return c, nil
}
