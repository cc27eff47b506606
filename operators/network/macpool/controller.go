package macpool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Options configure a Controller.
type Options struct {
	// Range is the NetworkAddonsConfig spec.kubeMacPool range (ParseRange).
	// Zero means the range recorded on the reservations ConfigMap, or a new
	// RandomRange recorded there on first start.
	Range Range
	// RangeSource, when set, is asked for the range at Start instead of
	// Range (e.g. NetworkAddonsConfigRange, which reads it from the
	// cluster); a zero result falls back as for a zero Range.
	RangeSource func(context.Context) (Range, error)
	// ConfigMap keeps the in-flight reservations and the range.
	ConfigMap types.NamespacedName
	// ReservationTTL is how long a reservation lasts when no stored
	// VirtualMachine turns up with its MAC (an admission a later webhook
	// refused, or a request that failed). It must exceed the API server's
	// request timeout (default 1m), so that a request still in flight
	// cannot store a VirtualMachine with an expired MAC.
	ReservationTTL time.Duration
	// FieldOwner is the field manager of the ConfigMap writes.
	FieldOwner string
	// Now is the clock.
	Now func() time.Time
}

// DefaultOptions gives a random range kept on ConfigMap
// converge-system/converge-macpool, reservations of 2 minutes, field
// owner converge-macpool and the wall clock.
func DefaultOptions() Options {
	return Options{
		ConfigMap:      types.NamespacedName{Namespace: "converge-system", Name: "converge-macpool"},
		ReservationTTL: 2 * time.Minute,
		FieldOwner:     "converge-macpool",
		Now:            time.Now,
	}
}

// Controller is converge's kubemacpool-mac-controller-manager: it owns
// the Pool, rebuilds it at start from the VirtualMachines (through an
// informer) and the reservations ConfigMap, keeps it in step with
// VirtualMachine changes and deletions, expires reservations no stored
// VirtualMachine picked up, and serves the mutating webhook (Handle).
//
// The window it closes: an admission hands a MAC to a VirtualMachine the
// API server has not stored yet. Were the pool only in memory, a restart
// in that window would rebuild from the stored VirtualMachines without
// that MAC and could hand it out again. So every MAC is first reserved in
// memory under the pool's mutex (concurrent admissions never get one
// address), then written to the ConfigMap, and only then returned to the
// API server; a restart reads the ConfigMap before serving. A reservation
// ends when the VirtualMachine is seen stored with the MAC, or after
// ReservationTTL when a fresh list of VirtualMachines shows nobody holds
// it.
//
// Run one active instance (the leader): two instances serving at once
// would each reserve from their own memory.
type Controller struct {
	c         client.Client
	informers cache.Informers
	o         Options
	store     *store
	pool      atomic.Pointer[Pool]
	ready     chan struct{}
}

// New takes a client that reads straight from the API server (the
// ConfigMap and the expiry checks must not see a stale cache), the
// informers of a cache the caller starts (a manager's), and options
// (DefaultOptions for zero fields); nothing is read before Start.
func New(c client.Client, informers cache.Informers, o Options) (*Controller, error) {
	d := DefaultOptions()
	if o.ConfigMap.Name == "" {
		o.ConfigMap = d.ConfigMap
	}
	if o.ReservationTTL <= 0 {
		o.ReservationTTL = d.ReservationTTL
	}
	if o.FieldOwner == "" {
		o.FieldOwner = d.FieldOwner
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	if !o.Range.IsZero() {
		if err := o.Range.Validate(); err != nil {
			return nil, err
		}
	}
	return &Controller{c: c, informers: informers, o: o, store: newStore(c, o.ConfigMap, o.FieldOwner), ready: make(chan struct{})}, nil
}

// Start loads the range and reservations, follows the VirtualMachines
// until the informer's first list is in the pool, becomes Ready, and then
// writes reservations and expires stale ones until ctx ends (it gives nil
// then). It gives an error when the ConfigMap cannot be read or the
// informer does not sync.
func (ctl *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("macpool")
	want := ctl.o.Range
	if ctl.o.RangeSource != nil {
		var err error
		if want, err = ctl.o.RangeSource(ctx); err != nil {
			return err
		}
		if !want.IsZero() {
			if err := want.Validate(); err != nil {
				return err
			}
		}
	}
	r, reservations, err := ctl.store.load(ctx, want)
	if err != nil {
		return err
	}
	pool := NewPool(r)
	for _, res := range reservations {
		pool.Restore(res)
	}
	ctl.pool.Store(pool)
	go ctl.store.run(ctx)

	vm := &unstructured.Unstructured{}
	vm.SetGroupVersionKind(VirtualMachineGVK)
	inf, err := ctl.informers.GetInformer(ctx, vm)
	if err != nil {
		return fmt.Errorf("macpool: watching %s: %w", VirtualMachineGVK, err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { ctl.observe(ctx, o, false) },
		UpdateFunc: func(_, o any) { ctl.observe(ctx, o, false) },
		DeleteFunc: func(o any) { ctl.observe(ctx, o, true) },
	})
	if err != nil {
		return fmt.Errorf("macpool: watching %s: %w", VirtualMachineGVK, err)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("macpool: the %s informer did not sync", VirtualMachineGVK)
	}
	logger.Info("MAC pool ready", "range", r.String(), "inUse", pool.Used(), "reservations", len(reservations))
	close(ctl.ready)

	tick := time.NewTicker(max(ctl.o.ReservationTTL/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := ctl.expire(ctx); err != nil {
				logger.Error(err, "expiring MAC reservations")
			}
		}
	}
}

// NeedLeaderElection gives true: one instance owns the pool.
func (ctl *Controller) NeedLeaderElection() bool { return true }

// Ready is closed once the pool holds every stored VirtualMachine's MACs
// and the stored reservations; Handle refuses requests before.
func (ctl *Controller) Ready() <-chan struct{} { return ctl.ready }

// ReadyCheck is a controller-runtime healthz.Checker failing until Ready.
func (ctl *Controller) ReadyCheck(*http.Request) error {
	select {
	case <-ctl.ready:
		return nil
	default:
		return errors.New("macpool: the MAC pool is not loaded yet")
	}
}

// Pool gives the pool (nil before Start has loaded it).
func (ctl *Controller) Pool() *Pool { return ctl.pool.Load() }

// observe applies one informer event to the pool.
func (ctl *Controller) observe(ctx context.Context, o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = d.Obj, true
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	var macs []MAC
	if !deleted {
		macs = storedMACs(u)
	}
	resolved, dups := ctl.Pool().Commit(key, macs)
	ctl.store.forget(resolved)
	for _, m := range dups {
		vms, _ := ctl.Pool().Holders(m)
		log.FromContext(ctx).WithName("macpool").Info("MAC held by more than one VirtualMachine (stored without the webhook)",
			"mac", m.String(), "virtualMachines", vms)
	}
}

// expire drops the reservations older than ReservationTTL that no stored
// VirtualMachine holds, after a fresh list from the API server (the
// informer may lag behind a VirtualMachine just stored).
func (ctl *Controller) expire(ctx context.Context) error {
	pool := ctl.Pool()
	stale := pool.Expired(ctl.o.Now().Add(-ctl.o.ReservationTTL))
	if len(stale) == 0 {
		return nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(VirtualMachineGVK.GroupVersion().WithKind(VirtualMachineGVK.Kind + "List"))
	if err := ctl.c.List(ctx, list); err != nil {
		return fmt.Errorf("listing %s: %w", VirtualMachineGVK, err)
	}
	held := map[MAC]string{}
	for i := range list.Items {
		for _, m := range storedMACs(&list.Items[i]) {
			held[m] = list.Items[i].GetNamespace() + "/" + list.Items[i].GetName()
		}
	}
	var gone []Reservation
	for _, res := range stale {
		if vm, ok := held[res.MAC]; ok {
			// Stored, the informer has not told us yet: commit it now.
			resolved, _ := pool.Commit(vm, appendVMMACs(list, vm))
			gone = append(gone, resolved...)
			continue
		}
		if pool.Unreserve(res) {
			gone = append(gone, res)
		}
	}
	ctl.store.forget(gone)
	return nil
}

func appendVMMACs(list *unstructured.UnstructuredList, key string) []MAC {
	for i := range list.Items {
		if list.Items[i].GetNamespace()+"/"+list.Items[i].GetName() == key {
			return storedMACs(&list.Items[i])
		}
	}
	return nil
}
