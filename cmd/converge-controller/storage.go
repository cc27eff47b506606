package main

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/cdi/cdioperator"
	"github.com/converge-dev/converge/operators/cdi/dvadmission"
	"github.com/converge-dev/converge/operators/hostpath/hppoperator"
	"github.com/converge-dev/converge/operators/hostpath/snapshotcontroller"
	"github.com/converge-dev/converge/operators/operand"
)

// setupStorageOperators adds the native operators of the storage operands
// to mgr: the CDI operator (operators/cdi/cdioperator; its cdi-importer
// reads the upload token public keys in keysNamespace; its cdi-apiserver
// role's Stop deletes the DataVolume admission webhook's configuration)
// and the
// HostPathProvisioner operator (operators/hostpath/hppoperator), both with
// oo, and when snapshots is set the HostPathProvisioner operator's
// snapshot-controller role (operators/hostpath/snapshotcontroller, gated
// on a native HostPathProvisioner). It gives the CDI operator's gates,
// which the DataVolume controller and the upload token issuer wait on.
func setupStorageOperators(mgr manager.Manager, engine *graph.Engine, oo operand.Options, keysNamespace string, snapshots bool) (*operand.Gates, error) {
	gates, err := cdioperator.Setup(mgr, engine, cdioperator.Options{UploadKeysNamespace: keysNamespace,
		APIServerStop: operand.DeleteOnStop(mgr.GetClient(), &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: dvadmission.ConfigurationName}})}, oo)
	if err != nil {
		return nil, err
	}
	hppGates, err := hppoperator.Setup(mgr, engine, oo)
	if err != nil {
		return nil, err
	}
	if snapshots {
		so := snapshotcontroller.DefaultOptions()
		so.Gate = func(ctx context.Context) error { return hppGates.Wait(ctx, hppoperator.RoleSnapshotController) }
		if err := snapshotcontroller.Setup(mgr, so); err != nil {
			return nil, err
		}
	}
	return gates, nil
}
