package main

// The VM validation webhook (virt-api's validating webhooks' role):
// vmadmission refuses VirtualMachines and VirtualMachineInstances with
// fields converge does not run, on the same server and certificate as the
// hco-webhook.

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/converge-dev/converge/internal/crdwait"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/hco/hcowebhook"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
	"github.com/converge-dev/converge/reconciler"
)

// setupVMValidation serves vmadmission on mgr's webhook server at once
// and adds a leader-only runnable that waits (polling every crdPoll) for
// the VirtualMachine and VirtualMachineInstance CRDs and for the
// certificate (certs; nil for an externally managed one), then registers
// the ValidatingWebhookConfiguration converge-vm-validator, retrying every
// 5s. Registering only once the CRDs exist keeps failurePolicy Fail from
// blocking anything before converge installs KubeVirt.
func setupVMValidation(mgr manager.Manager, crdPoll time.Duration, ep hcowebhook.Endpoint, certs *webhook.Manager) error {
	vmadmission.Register(mgr.GetWebhookServer())
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("vm-validation")
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !crdwait.Wait(ctx, c, crdPoll, "virtualmachines.kubevirt.io", "virtualmachineinstances.kubevirt.io") {
			return nil
		}
		apply := func(ctx context.Context, caBundle []byte) error {
			return vmadmission.Apply(ctx, c, ep, caBundle, reconciler.FieldManager)
		}
		if !registerWebhook(ctx, log, "the VM validation webhook "+vmadmission.ConfigurationName, certs, apply) {
			return nil
		}
		<-ctx.Done()
		return nil
	}))
}
