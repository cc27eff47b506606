package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Finalizer is the finalizer the agent puts on the VMIs it runs and
// removes once their domain is gone (a Removed report), so that a deleted
// VMI's object outlives its domain. It is KubeVirt's
// kubevirtv1.VirtualMachineInstanceFinalizer ("foregroundDeleteVirtualMachine",
// kubevirt.io/api core/v1 types.go: "Set by VMI controller to ensure VMIs
// are processed during deletion"), which KubeVirt removes once
// virt-handler reports the domain gone.
const Finalizer = kubevirtv1.VirtualMachineInstanceFinalizer

// APIOptions configure an APISource. Start from DefaultAPIOptions.
type APIOptions struct {
	// NodeName selects the VMIs whose status.nodeName is this node.
	NodeName string
	// Namespace limits the watch to one namespace ("": all).
	Namespace string
	// LabelledOnly watches only the VMIs labelled NodeNameLabel=NodeName,
	// as KubeVirt's virt-handler does; VMIs bound without the label
	// (objects older than it, tests that write status.nodeName by hand)
	// are then not run. False (the default) also watches the VMIs without
	// the label.
	LabelledOnly bool
	// RetryAfter is how often reports the API refused are tried again.
	RetryAfter time.Duration
	// Log receives store errors and retries.
	Log logr.Logger
}

// DefaultAPIOptions gives the options for node: every namespace, a 2 s
// retry and no logging.
func DefaultAPIOptions(node string) APIOptions {
	return APIOptions{NodeName: node, RetryAfter: 2 * time.Second, Log: logr.Discard()}
}

// NodeNameLabel is the label naming a VMI's node, kubevirt.io/nodeName
// (kubevirtv1.NodeNameLabel), which the VMI scheduler (converge's
// virt-controller role) sets before it writes status.nodeName, as
// KubeVirt's virt-controller does.
const NodeNameLabel = kubevirtv1.NodeNameLabel

// APISource is the Source of `converge-node vm --kubeconfig`:
// controller-runtime informer caches on kubevirt.io/v1
// VirtualMachineInstances (their watches reconnect and relist on their own
// when they break). CRDs have no field selector on status.nodeName, so
// the caches select on the label NodeNameLabel, as KubeVirt's virt-handler
// does: one holds the VMIs labelled with this node, the other (unless
// APIOptions.LabelledOnly) the VMIs without the label: pending ones, and
// bound ones that predate the label or were bound by hand. VMIs labelled
// for other nodes, the bulk of a large cluster, are never transferred.
// List gives the VMIs of both whose status.nodeName is the node. A bound
// VMI must not gain or lose the label while it runs (the scheduler sets
// it before binding and only ever fixes it to status.nodeName): moving
// from one watch to the other, it could be missing from both for a
// moment, and the agent would take its domain for an orphan.
//
// Store writes a report as a JSON merge patch of status (only what the
// agent changed) through the status subresource, with the VMI's
// resourceVersion: on a conflict it re-reads the VMI, and a VMI recreated
// under the same name (another UID) is never written to; before the
// first status of a live VMI it adds Finalizer, and a Removed report
// removes it (updates with retry on conflict). A report the API refuses
// is kept, overlaid on what List gives, and retried every
// APIOptions.RetryAfter until it is stored or its VMI is gone: none is
// lost. Statuses just written are overlaid too until the cache shows the
// write, so the level-triggered agent never acts on a stale status.
type APISource struct {
	c      client.Client
	caches []cache.Cache // labelled with the node, then (unless LabelledOnly) unlabelled
	opts   APIOptions

	changed chan struct{}
	ctx     context.Context
	flushMu sync.Mutex // one flush at a time (Store and the retry loop)

	mu      sync.Mutex
	pending map[types.UID]Report  // not stored yet, latest per VMI
	written map[types.UID]written // stored, maybe not in the cache yet
}

// written is a status stored over the object version base.
type written struct {
	base   string // the resourceVersion the cache had when it was written
	status kubevirtv1.VirtualMachineInstanceStatus
}

var _ Source = (*APISource)(nil)

// NewAPISource gives a source on the API server of cfg. Call Start before
// use. scheme must know kubevirt.io/v1 (nil: a new one that does).
func NewAPISource(cfg *rest.Config, scheme *runtime.Scheme, opts APIOptions) (*APISource, error) {
	if opts.NodeName == "" {
		return nil, errors.New("VM agent API source: no node name")
	}
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := kubevirtv1.AddToScheme(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("API server %s: client: %w", cfg.Host, err)
	}
	selectors, err := selectors(opts)
	if err != nil {
		return nil, err
	}
	var caches []cache.Cache
	for _, sel := range selectors {
		copts := cache.Options{Scheme: scheme, DefaultLabelSelector: sel}
		if opts.Namespace != "" {
			copts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
		}
		ca, err := cache.New(cfg, copts)
		if err != nil {
			return nil, fmt.Errorf("API server %s: cache of VMIs %s: %w", cfg.Host, sel, err)
		}
		caches = append(caches, ca)
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 2 * time.Second
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &APISource{c: c, caches: caches, opts: opts, changed: make(chan struct{}, 1),
		pending: map[types.UID]Report{}, written: map[types.UID]written{}}, nil
}

// Client gives the source's uncached client (for RegisterNode).
func (s *APISource) Client() client.Client { return s.c }

// selectors gives the label selectors of the caches: NodeNameLabel =
// the node, then (unless LabelledOnly) no NodeNameLabel. A node name that
// is no valid label value is an error naming it.
func selectors(opts APIOptions) ([]labels.Selector, error) {
	mine, err := labels.ValidatedSelectorFromSet(labels.Set{NodeNameLabel: opts.NodeName})
	if err != nil {
		return nil, fmt.Errorf("VM agent API source: node name %q is not a valid value of label %s: %w", opts.NodeName, NodeNameLabel, err)
	}
	if opts.LabelledOnly {
		return []labels.Selector{mine}, nil
	}
	none, err := labels.NewRequirement(NodeNameLabel, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	return []labels.Selector{mine, labels.NewSelector().Add(*none)}, nil
}

// Start runs the caches until ctx ends and waits for their first list.
// It fails when the VirtualMachineInstance CRD is not served or a cache
// does not sync before ctx ends; the error names the API server.
func (s *APISource) Start(ctx context.Context) error {
	s.ctx = ctx
	errc := make(chan error, len(s.caches))
	for _, ca := range s.caches {
		inf, err := ca.GetInformer(ctx, &kubevirtv1.VirtualMachineInstance{})
		if err != nil {
			return fmt.Errorf("watching VirtualMachineInstances (is the kubevirt.io CRD installed?): %w", err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.signal() },
			UpdateFunc: func(any, any) { s.signal() },
			DeleteFunc: func(any) { s.signal() },
		}); err != nil {
			return fmt.Errorf("watching VirtualMachineInstances: %w", err)
		}
		go func() { errc <- ca.Start(ctx) }()
	}
	for _, ca := range s.caches {
		if !ca.WaitForCacheSync(ctx) {
			select {
			case err := <-errc:
				return fmt.Errorf("watching VirtualMachineInstances: %w", err)
			default:
			}
			return errors.New("watching VirtualMachineInstances: the cache did not sync before the agent stopped")
		}
	}
	go s.retryLoop(ctx)
	return nil
}

// cached gets VMI id from the caches (the labelled one first); false when
// none holds it.
func (s *APISource) cached(ctx context.Context, id types.NamespacedName) (*kubevirtv1.VirtualMachineInstance, bool) {
	for _, ca := range s.caches {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := ca.Get(ctx, id, vmi); err == nil {
			return vmi, true
		}
	}
	return nil, false
}

// Changed is signalled on every VMI event and when a pending report is
// stored.
func (s *APISource) Changed() <-chan struct{} { return s.changed }

func (s *APISource) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// List gives the VMIs of the caches whose status.nodeName is the node
// (once each: the labelled cache's copy when a VMI is in both), sorted by
// namespace and name, with the reports not yet stored (or not yet in the
// cache) overlaid on their status. A cache error gives nothing (it is
// logged; the cache recovers on its own).
func (s *APISource) List() []*kubevirtv1.VirtualMachineInstance {
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var items []kubevirtv1.VirtualMachineInstance
	for _, ca := range s.caches {
		list := &kubevirtv1.VirtualMachineInstanceList{}
		if err := ca.List(ctx, list); err != nil {
			s.opts.Log.Error(err, "listing VirtualMachineInstances from the cache")
			return nil
		}
		items = append(items, list.Items...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*kubevirtv1.VirtualMachineInstance
	seen := map[types.UID]bool{}
	for i := range items {
		v := &items[i]
		if v.Status.NodeName != s.opts.NodeName || seen[v.UID] {
			continue
		}
		seen[v.UID] = true
		s.overlay(v)
		out = append(out, v.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// overlay puts the agent's latest status on v (s.mu held).
func (s *APISource) overlay(v *kubevirtv1.VirtualMachineInstance) {
	if r, ok := s.pending[v.UID]; ok {
		v.Status = *r.Status.DeepCopy()
		return
	}
	if w, ok := s.written[v.UID]; ok {
		if v.ResourceVersion == w.base {
			v.Status = *w.status.DeepCopy()
		} else {
			delete(s.written, v.UID) // the cache has our write, or newer
		}
	}
}

// Store writes r (see APISource); on failure r is kept and retried.
func (s *APISource) Store(r Report) {
	s.mu.Lock()
	s.pending[r.UID] = r
	s.mu.Unlock()
	s.flush()
}

// Pending gives how many reports wait to be stored.
func (s *APISource) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *APISource) retryLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.RetryAfter)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.Pending() > 0 && s.flush() {
				s.signal() // what List gives is now the API's
			}
		}
	}
}

// flush tries every pending report once; it reports whether any was
// stored or dropped.
func (s *APISource) flush() bool {
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	reps := make([]Report, 0, len(s.pending))
	for _, r := range s.pending {
		reps = append(reps, r)
	}
	s.mu.Unlock()
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	progress := false
	for _, r := range reps {
		w, err := s.store(ctx, r)
		s.mu.Lock()
		if err != nil {
			s.opts.Log.Error(err, "storing the VMI status; retrying", "after", s.opts.RetryAfter)
		} else {
			progress = true
			if cur, ok := s.pending[r.UID]; ok && equality.Semantic.DeepEqual(cur, r) {
				delete(s.pending, r.UID)
			}
			if w != nil {
				s.written[r.UID] = *w
			} else if r.Removed {
				delete(s.written, r.UID)
			}
		}
		s.mu.Unlock()
	}
	return progress
}

// store writes one report. It gives the write to overlay (nil: nothing
// written) and nil error when the report needs no more work, including
// when its VMI is gone.
func (s *APISource) store(ctx context.Context, r Report) (*written, error) {
	id := types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
	vmi, ok := s.cached(ctx, id)
	if !ok || vmi.UID != r.UID {
		vmi = nil // not in the caches (yet, or any more): ask the API
	}
	var out *written
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		out = nil
		if vmi == nil {
			vmi = &kubevirtv1.VirtualMachineInstance{}
			if err := s.c.Get(ctx, id, vmi); err != nil {
				vmi = nil
				return err
			}
		}
		cur := vmi
		vmi = nil // a retry re-reads from the API
		if cur.UID != r.UID {
			return nil // the report's VMI is gone; this one is another
		}
		if r.Removed {
			return s.finalizer(ctx, id, r.UID, false)
		}
		if cur.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(cur, Finalizer) {
			if err := s.finalizer(ctx, id, r.UID, true); err != nil {
				return err
			}
		}
		s.mu.Lock()
		if w, ok := s.written[r.UID]; ok && cur.ResourceVersion == w.base {
			cur.Status = w.status // compare with what we wrote, not a stale cache
		}
		s.mu.Unlock()
		if equality.Semantic.DeepEqual(cur.Status, r.Status) {
			return nil
		}
		patch, err := statusPatch(cur, r)
		if err != nil {
			return fmt.Errorf("status patch: %w", err)
		}
		if err := s.c.Status().Patch(ctx, cur.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
		out = &written{base: cur.ResourceVersion, status: *r.Status.DeepCopy()}
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("VirtualMachineInstance %s: storing status (phase %s, removed %t): %w", id, r.Status.Phase, r.Removed, err)
	}
	return out, nil
}

// statusPatch gives the JSON merge patch from vmi's status to r's, with
// vmi's metadata.resourceVersion: the API server refuses it with a
// conflict when the VMI changed since (or was recreated under its name),
// and store re-reads it.
func statusPatch(vmi *kubevirtv1.VirtualMachineInstance, r Report) ([]byte, error) {
	from, err := json.Marshal(vmi.Status)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(r.Status)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": vmi.ResourceVersion},
		"status":   json.RawMessage(diff),
	})
}

// finalizer adds or removes Finalizer on the VMI id of uid, re-reading it
// from the API on conflict. A VMI that is gone, or of another uid, is not
// an error.
func (s *APISource) finalizer(ctx context.Context, id types.NamespacedName, uid types.UID, add bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.c.Get(ctx, id, vmi); err != nil {
			return err
		}
		if vmi.UID != uid {
			return nil
		}
		var changed bool
		if add {
			if vmi.DeletionTimestamp != nil {
				return nil // too late: the domain goes as an orphan
			}
			changed = controllerutil.AddFinalizer(vmi, Finalizer)
		} else {
			changed = controllerutil.RemoveFinalizer(vmi, Finalizer)
		}
		if !changed {
			return nil
		}
		return s.c.Update(ctx, vmi)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		verb := "removing"
		if add {
			verb = "adding"
		}
		return fmt.Errorf("VirtualMachineInstance %s: %s finalizer %s: %w", id, verb, Finalizer, err)
	}
	return nil
}
