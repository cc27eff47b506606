package operand

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// ErrRoleGone ends the manager when the last native CR wanting a
// converge-controller role is gone, so that the process restarts without
// the role (as the MAC pool ends it on a range change).
var ErrRoleGone = errors.New("operand: the last native CR wanting a converge-controller role is gone; restarting without it")

// Gates gate an operator's converge-controller roles (Operator.Roles) on
// the native CRs that want them. The operator's reconciler counts the CRs
// after each reconcile; a role's gate opens when the count first becomes
// positive and is gone when it falls back to zero.
type Gates struct {
	op    Operator
	mu    sync.Mutex
	gates map[string]*gate
	// gone is signalled when a gate is gone.
	gone chan struct{}
}

type gate struct {
	role   Role
	count  int
	opened bool
	open   chan struct{} // closed when a CR first wants the role
	gone   chan struct{} // closed when, once open, no CR wants it
}

func newGates(op Operator) *Gates {
	g := &Gates{op: op, gates: map[string]*gate{}, gone: make(chan struct{}, 1)}
	for _, r := range op.Roles {
		g.gates[r.Name] = &gate{role: r, open: make(chan struct{}), gone: make(chan struct{})}
	}
	return g
}

// Wait blocks until a native CR wanting role exists and gives nil, or
// gives ctx's error when ctx ends first. A role the operator does not
// have is an error. Pass it as a webhook Configuration's Ready, or call it
// before registering a role's controllers.
func (g *Gates) Wait(ctx context.Context, role string) error {
	gt, ok := g.gates[role]
	if !ok {
		return fmt.Errorf("operand: %s has no role %q", g.op.Name, role)
	}
	select {
	case <-gt.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// observe records the CRs of the operator's kind: for each role, how many
// want it. A CR counts while it is native, or while it still carries the
// operator's finalizer (its roles are being removed).
func (g *Gates) observe(crs []unstructured.Unstructured) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gt := range g.gates {
		n := 0
		for i := range crs {
			cr := &crs[i]
			if !isNative(cr) && !controllerutil.ContainsFinalizer(cr, g.op.finalizer()) {
				continue
			}
			if gt.role.Wants == nil || gt.role.Wants(cr) {
				n++
			}
		}
		gt.count = n
		switch {
		case n > 0 && !gt.opened:
			gt.opened = true
			close(gt.open)
		case n == 0 && gt.opened:
			select {
			case <-gt.gone:
			default:
				close(gt.gone)
				select {
				case g.gone <- struct{}{}:
				default:
				}
			}
		}
	}
}

// watch is the operator's leader-only runnable of its roles: once a
// role's gate opened and then no CR wants it any more, it runs the Stop of
// every role gone by then and ends the manager with ErrRoleGone naming
// them.
func (g *Gates) watch(ctx context.Context) error {
	select {
	case <-g.gone:
	case <-ctx.Done():
		return nil
	}
	var names, failed []string
	for _, r := range g.op.Roles {
		gt := g.gates[r.Name]
		select {
		case <-gt.gone:
		default:
			continue
		}
		names = append(names, r.Name)
		if r.Stop != nil {
			if err := r.Stop(ctx); err != nil {
				failed = append(failed, fmt.Sprintf("stopping %s: %v", r.Name, err))
			}
		}
	}
	msg := fmt.Sprintf("%s (no native %s wants it)", strings.Join(names, ", "), g.op.GVK.Kind)
	if len(failed) > 0 {
		msg += "; " + strings.Join(failed, "; ")
	}
	return fmt.Errorf("%w: %s", ErrRoleGone, msg)
}
