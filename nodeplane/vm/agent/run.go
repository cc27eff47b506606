package agent

import (
	"context"
	"sync"
	"time"

	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Source gives the agent the VMIs assigned to its node and stores what the
// agent reports: APISource watches the API server (status.nodeName = the
// node, status writes, the finalizer); StaticSource serves a fixed list.
type Source interface {
	// List gives the current VMIs, with their last stored status.
	List() []*kubevirtv1.VirtualMachineInstance
	// Changed is signalled when List would give something new.
	Changed() <-chan struct{}
	// Store records a report: the status, and for a Removed report the
	// end of the VMI on this node.
	Store(Report)
}

// Run reconciles until ctx ends: at start, on every hypervisor lifecycle
// event, whenever src changes, when a Result asks for it, and every resync
// (0: never) to catch what events missed. The events and changes that
// queued up while a pass ran lead to one pass, not one each. Reports go
// to src.Store and errors to the agent's log. It returns nil when ctx
// ends, or the error of subscribing to events.
func (a *Agent) Run(ctx context.Context, src Source, resync time.Duration) error {
	events, err := a.hv.Events(ctx)
	if err != nil {
		return err
	}
	a.ctx = ctx
	defer func() { a.ctx = context.Background() }()
	for {
		res := a.Reconcile(src.List())
		for _, r := range res.Reports {
			src.Store(r)
		}
		for _, err := range res.Errors {
			a.opts.Log.Error(err, "reconcile")
		}
		if res.Requeue {
			continue
		}
		wait := resync
		if res.RequeueAfter > 0 && (wait == 0 || res.RequeueAfter < wait) {
			wait = res.RequeueAfter
		}
		var timer <-chan time.Time
		var t *time.Timer
		if wait > 0 {
			t = time.NewTimer(wait)
			timer = t.C
		}
		stop := false
		select {
		case <-ctx.Done():
			stop = true
		case ev, ok := <-events:
			stop = !ok
			a.logEvent(ev)
		case <-src.Changed():
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if stop || !a.drainEvents(events) {
			return nil
		}
		select { // the pass to come reads src after this signal
		case <-src.Changed():
		default:
		}
	}
}

// drainEvents takes every event already queued: they are hints to look
// again, and the one pass that follows reads every domain (a pass per
// queued event re-read the same domains: a VM's start queues two,
// Defined and Started, while the pass that started it still runs). It
// reports false when the channel closed.
func (a *Agent) drainEvents(events <-chan hypervisor.Event) bool {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return false
			}
			a.logEvent(ev)
		default:
			return true
		}
	}
}

// logEvent logs a reconnection to the hypervisor.
func (a *Agent) logEvent(ev hypervisor.Event) {
	if ev.Type == hypervisor.EventReconnected {
		a.opts.Log.Info("hypervisor reconnected; re-reading every domain", "detail", ev.Detail)
	}
}

// StaticSource is a Source over an in-memory list of VMIs (from files, for
// `converge-node vm --vmi-file`, and for tests): Store writes the status back
// into the list and drops a VMI once its removal is reported. It is safe
// for concurrent use.
type StaticSource struct {
	mu      sync.Mutex
	vmis    []*kubevirtv1.VirtualMachineInstance
	changed chan struct{}
	stored  chan Report
}

// NewStaticSource gives a source serving deep copies of vmis.
func NewStaticSource(vmis ...*kubevirtv1.VirtualMachineInstance) *StaticSource {
	s := &StaticSource{changed: make(chan struct{}, 1), stored: make(chan Report, 1024)}
	for _, v := range vmis {
		s.vmis = append(s.vmis, v.DeepCopy())
	}
	return s
}

// List gives deep copies of the current VMIs.
func (s *StaticSource) List() []*kubevirtv1.VirtualMachineInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*kubevirtv1.VirtualMachineInstance, len(s.vmis))
	for i, v := range s.vmis {
		out[i] = v.DeepCopy()
	}
	return out
}

// Changed is signalled by Add and Delete.
func (s *StaticSource) Changed() <-chan struct{} { return s.changed }

// Stored delivers every report stored, in order (reports beyond 1024
// unread ones are dropped), for callers that follow progress.
func (s *StaticSource) Stored() <-chan Report { return s.stored }

// Store records r's status on its VMI (matched by namespace, name and UID)
// and drops the VMI when r.Removed.
func (s *StaticSource) Store(r Report) {
	s.mu.Lock()
	for i, v := range s.vmis {
		if v.Namespace == r.Namespace && v.Name == r.Name && v.UID == r.UID {
			if r.Removed {
				s.vmis = append(s.vmis[:i], s.vmis[i+1:]...)
			} else {
				v.Status = *r.Status.DeepCopy()
			}
			break
		}
	}
	s.mu.Unlock()
	select {
	case s.stored <- r:
	default:
	}
}

// Add adds (or replaces, by namespace and name) a VMI.
func (s *StaticSource) Add(vmi *kubevirtv1.VirtualMachineInstance) {
	s.mu.Lock()
	replaced := false
	for i, v := range s.vmis {
		if v.Namespace == vmi.Namespace && v.Name == vmi.Name {
			s.vmis[i], replaced = vmi.DeepCopy(), true
		}
	}
	if !replaced {
		s.vmis = append(s.vmis, vmi.DeepCopy())
	}
	s.mu.Unlock()
	s.signal()
}

// Delete marks a VMI as being deleted (sets its deletionTimestamp to now),
// as the API server does for an object with a finalizer; it reports
// whether the VMI was found.
func (s *StaticSource) Delete(namespace, name string, now time.Time) bool {
	s.mu.Lock()
	found := false
	for _, v := range s.vmis {
		if v.Namespace == namespace && v.Name == name && v.DeletionTimestamp == nil {
			t := metav1.NewTime(now)
			v.DeletionTimestamp, found = &t, true
		}
	}
	s.mu.Unlock()
	if found {
		s.signal()
	}
	return found
}

// Get gives a deep copy of one VMI, or nil.
func (s *StaticSource) Get(namespace, name string) *kubevirtv1.VirtualMachineInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.vmis {
		if v.Namespace == namespace && v.Name == name {
			return v.DeepCopy()
		}
	}
	return nil
}

func (s *StaticSource) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}
