package datavolume

import (
	"context"
	"errors"
	"fmt"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	tokenapi "github.com/converge-dev/converge/api/uploadtoken"
	"github.com/converge-dev/converge/operators/cdi/clonetoken"
)

// authorize checks the clone token of dv, which clones PVC srcNS/srcName
// of another namespace, as CDI's clone-controller-base.go
// (ensureExtendedTokenDV, then validateCloneTokenDV): without
// AnnExtendedCloneToken, the webhook's AnnCloneToken must be valid and
// name this clone, and is extended (bound to dv's UID, written on dv
// before anything else happens, so that a clone waiting for its source
// outlives the short token); with it, the extended token must name this
// clone and dv's UID. A missing, forged, expired or mismatched token
// fails dv (ReasonCloneUnauthorized, the message saying which); an API
// error is returned.
func (r *Reconciler) authorize(ctx context.Context, dv *cdiv1.DataVolume, srcNS, srcName string) (clone, error) {
	cl := clonetoken.Clone{SourceNamespace: srcNS, SourceName: srcName, TargetNamespace: dv.Namespace, TargetName: dv.Name, TargetUID: string(dv.UID)}
	deny := func(err error) clone {
		return clone{failReason: dvapi.ReasonCloneUnauthorized, message: fmt.Sprintf(
			"cloning PVC %s/%s into namespace %s: %v", srcNS, srcName, dv.Namespace, err)}
	}
	if r.Tokens == nil {
		return deny(errors.New("converge-controller runs without clone tokens (no DataVolume admission webhook), so it clones within a namespace only")), nil
	}
	permanent := func(err error) bool {
		return errors.Is(err, tokenapi.ErrMalformed) || errors.Is(err, tokenapi.ErrSignature) || errors.Is(err, tokenapi.ErrExpired) || errors.Is(err, tokenapi.ErrCloneTokenMismatch)
	}
	if ext := dv.Annotations[tokenapi.AnnExtendedCloneToken]; ext != "" {
		if err := r.Tokens.Check(ctx, ext, cl); err != nil {
			if permanent(err) {
				return deny(fmt.Errorf("annotation %s: %w", tokenapi.AnnExtendedCloneToken, err)), nil
			}
			return clone{}, err
		}
		return clone{}, nil
	}
	short := dv.Annotations[tokenapi.AnnCloneToken]
	if short == "" {
		return deny(fmt.Errorf("clone token missing (annotation %s, stamped by the DataVolume admission webhook %s when the creator may create datavolumes/source in %s)", tokenapi.AnnCloneToken, "datavolume-mutate.cdi.kubevirt.io", srcNS)), nil
	}
	ext, err := r.Tokens.Extend(ctx, short, cl)
	if err != nil {
		if permanent(err) {
			return deny(fmt.Errorf("annotation %s: %w", tokenapi.AnnCloneToken, err)), nil
		}
		return clone{}, err
	}
	orig := dv.DeepCopy()
	dv.Annotations[tokenapi.AnnExtendedCloneToken] = ext
	if err := r.Client.Patch(ctx, dv, client.MergeFrom(orig)); err != nil {
		return clone{}, fmt.Errorf("writing the extended clone token: %w", err)
	}
	return clone{}, nil
}
