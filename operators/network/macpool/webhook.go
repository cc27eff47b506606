package macpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
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
// Requests are refused (503) until the pool is Ready.
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

// Webhook gives the MAC pool's webhook as internal/webhook registers it:
// the MutatingWebhookConfiguration converge-macpool, one webhook on
// CREATE and UPDATE of kubevirt.io virtualmachines (matchPolicy
// Equivalent: requests in other versions are converted to v1 for it),
// failurePolicy Fail (a VM must never be stored without the pool knowing
// its MACs), sideEffects NoneOnDryRun (the reservation ConfigMap is
// written on real requests only), reinvocationPolicy Never,
// timeoutSeconds 10, admissionReviewVersions [v1], as upstream
// kubemacpool's mutatevirtualmachines.kubemacpool.io. The Controller's
// Handle serves Path (refusing requests until the pool is Ready); the
// configuration is registered once the VirtualMachine CRD is established
// and the pool is Ready, and its log lines name the pool's range.
func Webhook(ctl *Controller) webhook.Configuration {
	return webhook.Configuration{
		Name:    ConfigurationName,
		What:    "the MAC pool webhook",
		LogName: "macpool",
		Mutating: []webhook.MutatingHook{{Name: WebhookName, Path: Path,
			Group: VirtualMachineGVK.Group, Version: VirtualMachineGVK.Version, Resource: "virtualmachines",
			MatchPolicy: admissionregistrationv1.Equivalent, SideEffects: admissionregistrationv1.SideEffectClassNoneOnDryRun}},
		Handlers: []webhook.Handler{{Path: Path, Handler: &ctrlwebhook.Admission{Handler: ctl}}},
		CRDs:     []string{"virtualmachines.kubevirt.io"},
		Ready: func(ctx context.Context) error {
			select {
			case <-ctl.Ready():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		LogValues: func() []any { return []any{"range", ctl.Pool().Range().String()} },
	}
}
