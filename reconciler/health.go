package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/operators/hco/hcstatus"
	"github.com/converge-dev/converge/reconciler/inventory"
)

// Health is a component's state after a sync.
type Health string

// Health values, worst last.
const (
	// Healthy: every object is ready (kstatus Current; operands
	// Available=True and Degraded not True).
	Healthy Health = "Healthy"
	// Progressing: applied, and an operand is not Available yet.
	Progressing Health = "Progressing"
	// Waiting: not applied this sync because a component it dependsOn is
	// not healthy (health gates). Its objects keep their previous
	// inventory entries and are not pruned.
	Waiting Health = "Waiting"
	// Failed: applied, and an operand reports Degraded=True.
	Failed Health = "Failed"
)

// ComponentHealth is one graph component's health after a sync.
type ComponentHealth struct {
	// Name is the component (hco, virt, cdi, …).
	Name   string
	Health Health
	// Message says why the component is not Healthy, naming the object
	// and condition, e.g. "waiting for cdi: CDI/cdi-kubevirt-hyperconverged
	// Available=False: deploying"; empty when Healthy.
	Message string
}

// blockedBy returns why n may not be applied yet: the message of each
// dependency that is not Healthy, as "waiting for <dep>: <why>" joined by
// "; ". It returns "" when every dependency is Healthy.
func blockedBy(n graph.Node, health map[string]ComponentHealth) string {
	var msgs []string
	for _, d := range n.DependsOn {
		h, ok := health[d]
		switch {
		case !ok:
			msgs = append(msgs, fmt.Sprintf("waiting for %s: not applied", d))
		case h.Health != Healthy:
			msgs = append(msgs, fmt.Sprintf("waiting for %s: %s", d, h.Message))
		}
	}
	return strings.Join(msgs, "; ")
}

// nodeHealth evaluates n after its objects were applied and its stage's
// kstatus wait passed: kstatus-rule objects the stage waited for count as
// Current (the wait fails the sync otherwise; objects skipped as
// unchanged keep the state they had when applied), the others (without
// Options.Wait) are read and judged by kstatus, "none" objects are
// ignored, each "conditions" object is read and judged with
// hcstatus.Assess, and each object with a workload rule (VirtualMachine,
// DataVolume, ...) is read and judged with WorkloadHealth. The operands
// read are recorded in ops by inventory ID, for the HC status.
//
// applied holds the generation the API server gave each object this
// sync applied (by inventory ID). An object read at an older generation
// is Progressing whatever its status says: the reader (the controller's
// cache) has not seen the apply yet, and a status it holds is of the
// spec before (an operand's Available=True of the previous spec made a
// Sync Ready before its operator saw the change).
func (p *Pipeline) nodeHealth(ctx context.Context, r *graph.Rendered, n graph.Node, ops map[string]hcstatus.Operand, applied map[string]int64) (ComponentHealth, error) {
	h := ComponentHealth{Name: n.Name, Health: Healthy}
	var msgs []string
	add := func(state Health, msg string) {
		switch state {
		case Failed:
			h.Health = Failed
			msgs = append(msgs, msg)
		case Progressing:
			if h.Health != Failed {
				h.Health = Progressing
			}
			msgs = append(msgs, msg)
		}
	}
	for _, o := range n.Objects {
		rule := r.HealthRule(o.GetKind())
		judged := rule == graph.HealthConditions || WorkloadRule(rule) || (rule == graph.HealthKstatus && !p.waitsFor(r, o))
		if !judged {
			continue
		}
		cur, err := p.readLive(ctx, o)
		if err != nil {
			return h, err
		}
		id := inventory.ID(o)
		if rule == graph.HealthConditions {
			op := operandOf(o, cur)
			op.Generation = max(op.Generation, applied[id])
			ops[id] = op
		}
		if gen := applied[id]; cur != nil && cur.GetGeneration() < gen {
			add(Progressing, fmt.Sprintf("%s: generation %d applied, not read back yet (read %d)", ssaSubject(o), gen, cur.GetGeneration()))
			continue
		}
		switch {
		case rule == graph.HealthKstatus:
			state, msg, err := kstatusOf(o, cur)
			if err != nil {
				return h, err
			}
			add(state, msg)
		case rule == graph.HealthConditions:
			state, msg := hcstatus.Assess(ops[id])
			switch state {
			case hcstatus.DegradedState:
				add(Failed, msg)
			case hcstatus.NotReady:
				add(Progressing, msg)
			}
		default:
			state, msg := WorkloadHealth(rule, cur)
			add(state, ssaSubject(o)+" "+string(state)+": "+msg)
		}
	}
	h.Message = strings.Join(msgs, "; ")
	return h, nil
}

// readLive reads o from the cluster; nil when it is not found (not
// created yet, not in the cache yet, or its kind not served yet).
func (p *Pipeline) readLive(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(o.GroupVersionKind())
	err := p.Reader.Get(ctx, client.ObjectKeyFromObject(o), cur)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", ssaSubject(o), err)
	}
	return cur, nil
}

// readOperand reads o and gives it as an operand (operandOf).
func (p *Pipeline) readOperand(ctx context.Context, o *unstructured.Unstructured) (hcstatus.Operand, error) {
	cur, err := p.readLive(ctx, o)
	if err != nil {
		return hcstatus.Operand{}, err
	}
	return operandOf(o, cur), nil
}

// operandOf gives the operand o as cur (o read from the cluster, nil when
// not found: no conditions) has it: its status conditions, generation and
// status.observedGeneration, named "<name>" or "<namespace>/<name>".
func operandOf(o, cur *unstructured.Unstructured) hcstatus.Operand {
	op := hcstatus.Operand{Kind: o.GetKind(), Name: o.GetName()}
	if o.GetNamespace() != "" {
		op.Name = o.GetNamespace() + "/" + o.GetName()
	}
	if cur == nil {
		return op
	}
	if raw, ok, _ := unstructured.NestedSlice(cur.Object, "status", "conditions"); ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &op.Conditions)
	}
	op.Generation = cur.GetGeneration()
	op.ObservedGeneration, _, _ = unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
	return op
}

// kstatusOf judges o, read as cur (nil when not found yet), with kstatus:
// Healthy when Current, Failed when Failed, Progressing otherwise (not
// found yet included), with a message naming the object and kstatus's
// reason.
func kstatusOf(o, cur *unstructured.Unstructured) (Health, string, error) {
	if cur == nil {
		return Progressing, ssaSubject(o) + " not found yet", nil
	}
	res, err := status.Compute(cur)
	if err != nil {
		return "", "", fmt.Errorf("%s: computing its status: %w", ssaSubject(o), err)
	}
	switch res.Status {
	case status.CurrentStatus:
		return Healthy, "", nil
	case status.FailedStatus:
		return Failed, fmt.Sprintf("%s %s: %s", ssaSubject(o), res.Status, res.Message), nil
	}
	return Progressing, fmt.Sprintf("%s %s: %s", ssaSubject(o), res.Status, res.Message), nil
}
