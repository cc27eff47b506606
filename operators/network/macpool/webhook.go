package macpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	acv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/internal/webhook"
)

// Names and path of the webhook (upstream kubemacpool registers
// mutatevirtualmachines.kubemacpool.io on /mutate-virtualmachines).
const (
	// ConfigurationName is the MutatingWebhookConfiguration's name.
	ConfigurationName = "converge-macpool"
	// WebhookName is the webhook for VirtualMachines.
	WebhookName = "mutatevirtualmachines.macpool.converge.dev"
	// Path is the server path the webhook calls.
	Path = "/mutate-virtualmachines"
)

var _ ctrladmission.Handler = (*Controller)(nil)

// Handle is the mutating admission handler for VirtualMachine CREATE and
// UPDATE (kubemacpool's virtualmachine mutator). Every NIC
// (spec.template.spec.domain.devices.interfaces[]) ends up with a MAC:
//   - a NIC with macAddress keeps it when no other VirtualMachine holds or
//     has reserved it; otherwise the request is denied with a message
//     naming that VirtualMachine;
//   - on UPDATE, a NIC without one keeps the MAC the same-named NIC had in
//     the old object (an apply that does not carry the webhook's field);
//   - any other NIC gets the pool's next free address, or the request is
//     denied when the range is exhausted.
//
// New MACs are reserved in the pool and written to the reservations
// ConfigMap before the patch is returned; a dry run reserves nothing.
// Requests are refused (500) until the pool is Ready.
func (ctl *Controller) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return ctrladmission.Allowed("")
	}
	select {
	case <-ctl.ready:
	default:
		return ctrladmission.Errored(http.StatusServiceUnavailable, errors.New("the MAC pool is still loading"))
	}
	name := webhook.RequestName(req)
	owner := req.Namespace + "/" + name
	what := "VirtualMachine " + owner
	obj := map[string]any{}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return ctrladmission.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", what, err))
	}
	list, err := nics(obj)
	if err != nil {
		return ctrladmission.Denied(fmt.Sprintf("%s: %v", what, err))
	}
	if len(list) == 0 {
		return ctrladmission.Allowed("no interfaces")
	}
	previous := map[string]string{}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old := map[string]any{}
		if err := json.Unmarshal(req.OldObject.Raw, &old); err == nil {
			oldList, _ := nics(old)
			for _, n := range oldList {
				previous[n.name] = n.mac
			}
		}
	}

	pool := ctl.Pool()
	now := ctl.o.Now()
	var made []Reservation
	undo := func() {
		for _, r := range made {
			pool.Unreserve(r)
		}
	}
	set := make([]string, len(list))
	seen := map[MAC]string{}
	for i, n := range list {
		field := fmt.Sprintf("%s: interface %q (spec.template.spec.domain.devices.interfaces[%d])", what, n.name, i)
		given := n.mac
		if given == "" {
			given = previous[n.name]
		}
		var m MAC
		if given != "" {
			if m, err = ParseMAC(given); err != nil {
				undo()
				return ctrladmission.Denied(fmt.Sprintf("%s: macAddress %q: %v", field, given, err))
			}
			if other, dup := seen[m]; dup {
				undo()
				return ctrladmission.Denied(fmt.Sprintf("%s: MAC %s is also given to interface %q", field, m, other))
			}
			newly, err := pool.Claim(m, owner, now)
			if err != nil {
				undo()
				return ctrladmission.Denied(fmt.Sprintf("%s: %v", field, err))
			}
			if newly {
				made = append(made, Reservation{MAC: m, Owner: owner, Since: now})
			}
		} else {
			if m, err = pool.Allocate(owner, now); err != nil {
				undo()
				return ctrladmission.Denied(fmt.Sprintf("%s: %v", field, err))
			}
			made = append(made, Reservation{MAC: m, Owner: owner, Since: now})
		}
		seen[m] = n.name
		if n.mac != m.String() {
			set[i] = m.String()
		}
	}
	if req.DryRun != nil && *req.DryRun {
		undo()
	} else if len(made) > 0 {
		if err := ctl.store.persist(ctx, made); err != nil {
			undo()
			return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: %w", what, err))
		}
	}
	if err := setMACs(obj, set); err != nil {
		return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: %w", what, err))
	}
	mutated, err := json.Marshal(obj)
	if err != nil {
		return ctrladmission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: %w", what, err))
	}
	return ctrladmission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// Register takes a controller-runtime webhook server and serves the
// Controller's Handle on Path.
func Register(srv ctrlwebhook.Server, ctl *Controller) {
	srv.Register(Path, &ctrlwebhook.Admission{Handler: ctl})
}

// Endpoint is where the API server reaches the webhook server, as for the
// hco-webhook.
type Endpoint = webhook.Endpoint

// Configuration takes the endpoint and a PEM CA bundle (nil leaves it to
// webhookcert's injection) and gives the MutatingWebhookConfiguration
// converge-macpool: one webhook on CREATE and UPDATE of kubevirt.io
// virtualmachines (matchPolicy Equivalent: requests in other versions are
// converted to v1 for it), failurePolicy Fail (a VM must never be stored
// without the pool knowing its MACs), sideEffects NoneOnDryRun (the
// reservation ConfigMap is written on real requests only), timeoutSeconds
// 10, admissionReviewVersions [v1], as upstream kubemacpool's
// mutatevirtualmachines.kubemacpool.io.
func Configuration(ep Endpoint, caBundle []byte) *acv1.MutatingWebhookConfigurationApplyConfiguration {
	cc := ep.AdmissionClientConfig(Path, caBundle)
	return acv1.MutatingWebhookConfiguration(ConfigurationName).WithWebhooks(
		acv1.MutatingWebhook().WithName(WebhookName).WithClientConfig(cc).
			WithRules(acv1.RuleWithOperations().
				WithOperations(admissionregistrationv1.Create, admissionregistrationv1.Update).
				WithAPIGroups(VirtualMachineGVK.Group).WithAPIVersions(VirtualMachineGVK.Version).
				WithResources("virtualmachines").WithScope(admissionregistrationv1.NamespacedScope)).
			WithMatchPolicy(admissionregistrationv1.Equivalent).
			WithFailurePolicy(admissionregistrationv1.Fail).
			WithSideEffects(admissionregistrationv1.SideEffectClassNoneOnDryRun).
			WithReinvocationPolicy(admissionregistrationv1.NeverReinvocationPolicy).
			WithTimeoutSeconds(10).
			WithAdmissionReviewVersions("v1"))
}

// Apply takes a client, the endpoint, a PEM CA bundle (may be nil) and a
// field manager, and creates or updates the configuration with
// server-side apply (forcing ownership of the fields it sets).
func Apply(ctx context.Context, c client.Client, ep Endpoint, caBundle []byte, fieldOwner string) error {
	if ep.Service == nil && ep.URL == "" {
		return fmt.Errorf("macpool: the webhook endpoint needs a Service or a URL")
	}
	if err := c.Apply(ctx, Configuration(ep, caBundle), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("MutatingWebhookConfiguration %s: applying: %w", ConfigurationName, err)
	}
	return nil
}
