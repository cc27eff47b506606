package uploadtoken

import (
	"errors"
	"fmt"
)

// Clone token annotations and params, as CDI (pkg/controller/common
// AnnCloneToken, AnnExtendedCloneToken; pkg/apiserver/webhooks
// datavolume-mutate.go writes the params).
const (
	// AnnCloneToken is the DataVolume annotation the DataVolume admission
	// webhook stamps on a clone it authorized: a token of TokenLifetime
	// (operators/cdi/uploadtoken.Options) naming the source PVC and the
	// target DataVolume.
	AnnCloneToken = "cdi.kubevirt.io/storage.clone.token"
	// AnnExtendedCloneToken is the DataVolume annotation the DataVolume
	// controller writes once it checked AnnCloneToken: the same claims
	// plus ParamUID, valid ExtendedLifetime, so that a clone waiting for
	// its source longer than the short token lives still proceeds.
	AnnExtendedCloneToken = "cdi.kubevirt.io/storage.extended.clone.token"

	// ParamTargetNamespace is the param naming the target DataVolume's
	// namespace.
	ParamTargetNamespace = "targetNamespace"
	// ParamTargetName is the param naming the target DataVolume.
	ParamTargetName = "targetName"
	// ParamUID is the param an extended token binds to the target
	// DataVolume's UID.
	ParamUID = "uid"
)

// ErrCloneTokenMismatch: a clone token verifies but names another
// operation, source or target (CDI's "invalid token").
var ErrCloneTokenMismatch = errors.New("invalid token")

// CheckClone takes the claims of a verified clone token and the clone
// (source PVC namespace/name, target DataVolume namespace/name/UID) and
// gives nil when the token is for it, else an error wrapping
// ErrCloneTokenMismatch saying which claim differs. A token without
// ParamUID matches any UID (the short token the webhook stamps before the
// DataVolume has one), as CDI's validateTokenData.
func CheckClone(c Claims, srcNamespace, srcName, targetNamespace, targetName, targetUID string) error {
	uid := c.Params[ParamUID]
	for _, d := range []struct{ what, got, want string }{
		{"operation", string(c.Operation), string(OperationClone)},
		{"resource", c.Resource.Resource, PVCResource.Resource},
		{"source namespace", c.Namespace, srcNamespace},
		{"source name", c.Name, srcName},
		{"target namespace", c.Params[ParamTargetNamespace], targetNamespace},
		{"target name", c.Params[ParamTargetName], targetName},
	} {
		if d.got != d.want {
			return fmt.Errorf("%w: %s %q, expected %q", ErrCloneTokenMismatch, d.what, d.got, d.want)
		}
	}
	if uid != "" && uid != targetUID {
		return fmt.Errorf("%w: target uid %q, expected %q", ErrCloneTokenMismatch, uid, targetUID)
	}
	return nil
}
