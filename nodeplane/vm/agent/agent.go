// Package agent is the core of converge's VM agent (`converge-node vm`, the
// virt-handler role): given the VMIs assigned to its node, it converges the
// node's libvirt domains on them through hypervisor.Hypervisor and computes
// the VMI status to report. It is level-triggered and keeps almost no state
// of its own: everything is re-read from the hypervisor and from the VMIs'
// last reported status on every Reconcile, so a restarted agent picks up
// where the old one stopped. The only in-memory state is the deadline of
// each graceful shutdown in flight; a restart re-asks the guest and starts
// a new grace period.
//
// What Reconcile does, per VMI (domain name "<namespace>_<name>"):
//
//	VMI                               domain                    action → reported status
//	live, phase ""/Pending/Scheduled  absent                    Build, prepare disks, define, start → Running (Failed if Build refuses)
//	live, phase Running               absent                    → Failed, reason DomainVanished
//	live                              running                   → Running, Ready
//	live                              paused / shutting down    → Running, not Ready
//	live, not started yet             defined, shut off         start → Running
//	live                              off after guest poweroff  → Succeeded
//	live                              crashed / destroyed / off → Failed (reason names the cause)
//	Succeeded or Failed               present                   destroy if running, undefine, release disks and networks
//	deleting (deletionTimestamp)      running                   ACPI shutdown; after terminationGracePeriodSeconds, destroy
//	deleting                          shut off                  undefine → Removed (the finalizer may go)
//	deleting                          absent                    → Removed
//
// With Options.Networks set, the VMI's NICs on networks the node plumbs
// itself (CNI bridge networks, nodeplane/network/netattach) are set up before the
// domain is defined (CNI ADD; a failure leaves the VMI Scheduled, not
// Ready, reason NetworkSetupFailed, and is retried), bound to the VM's taps
// once the domain runs (Plumb), verified and repaired for a domain found
// running by a restarted agent (Check), and torn down once the domain is
// gone (Teardown: CNI DEL, namespace removal). A VMI being deleted is
// reported Removed only after its teardown succeeded, so nothing leaks.
//
// With Options.Disks set, the files of the volumes the node prepares
// itself (containerDisk overlays, emptyDisk images, cloud-init, secret and
// configMap ISOs: nodeplane/vm/vmdisks) are made once Build accepted the
// VMI and before the domain is defined (a failure leaves the VMI
// Scheduled, not Ready, reason DiskSetupFailed, and is retried), and
// removed with the networks once the domain is gone (and, should a
// removal be missed across an agent restart, by DiskSetup.Sweep once
// neither a VMI nor a domain claims them). A VMI whose only
// refused volumes are not ready yet, or whose disks are (both wrap
// domain.ErrVolumeNotReady: a PVC not bound, a DataVolume importing, a
// containerDisk still pulling), stays Scheduled, not Ready, reason
// VolumesNotReady, and is retried, as KubeVirt's VMI waits for its
// volumes.
//
// With Options.Domain.ResolvePVC set, the disks of a running domain
// follow their claims' growth (see expand.go, as KubeVirt's ExpandDisks)
// and status.volumeStatus lists the claims' volumes.
//
// A domain carrying converge's metadata (domain.Metadata) that no VMI
// claims, by name and UID, is an orphan: it is shut down (OrphanGracePeriod),
// destroyed and undefined. Domains without converge's metadata are never
// touched.
package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

// NetworkSetup attaches a VMI's NICs to networks the node plumbs itself
// (nodeplane/network/netattach implements it with CNI). Every method is
// idempotent and names the VMI in its errors.
type NetworkSetup interface {
	// Setup runs before the domain is defined (CNI ADD). It gives the tap
	// of each interface it handles, keyed by the network's name
	// (spec.networks[].name); the other interfaces go to
	// domain.Options.ResolveBridge.
	Setup(vmi *kubevirtv1.VirtualMachineInstance) (map[string]domain.Tap, error)
	// Plumb runs once the domain started by this agent runs: it joins the
	// taps with their networks.
	Plumb(vmi *kubevirtv1.VirtualMachineInstance) error
	// Check runs for a running domain this agent did not start (after an
	// agent restart): it verifies what Setup and Plumb made, and makes
	// what is missing.
	Check(vmi *kubevirtv1.VirtualMachineInstance) error
	// Teardown runs once the VMI's domain is gone: it releases everything
	// Setup and Plumb made (CNI DEL, the VMI's network namespace). The VMI
	// may be gone from the API: only its identity is given.
	Teardown(namespace, name string, uid types.UID) error
}

// DiskSetup makes the files of the volumes the node prepares itself
// (nodeplane/vm/vmdisks implements it). Both methods are idempotent and
// name the VMI in their errors.
type DiskSetup interface {
	// Prepare runs after Build accepted the VMI (Domain.ResolveVolume
	// gave the paths) and before the domain is defined. An error wrapping
	// domain.ErrVolumeNotReady means "not yet" (a pull in progress), not
	// a failure.
	Prepare(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error
	// Release runs once the VMI's domain is gone: nothing of the VMI's
	// volumes stays on the node. The VMI may be gone from the API: only
	// its identity is given.
	Release(namespace, name string, uid types.UID) error
	// Sweep runs at the end of every pass: it releases what the disks of
	// VMIs keep rejects left on the node (neither listed nor with a
	// domain: a Release missed across an agent restart).
	Sweep(keep func(uid types.UID) bool) error
}

// Options configure an Agent. Start from DefaultOptions.
type Options struct {
	// NodeName is reported in status.nodeName. VMIs whose status.nodeName
	// names another node are skipped.
	NodeName string
	// Domain are the translation options (domain type, emulator, resolvers).
	Domain domain.Options
	// DefaultGracePeriod applies when a VMI has no
	// terminationGracePeriodSeconds (KubeVirt's default is 30 s).
	DefaultGracePeriod time.Duration
	// OrphanGracePeriod is how long an orphan domain's guest gets to power
	// off before it is destroyed.
	OrphanGracePeriod time.Duration
	// RetryAfter is when Reconcile asks to run again after a hypervisor
	// error.
	RetryAfter time.Duration
	// Now is the clock (time.Now by default); tests advance their own.
	Now func() time.Time
	// Log receives one line per action taken.
	Log logr.Logger
	// Networks, when set, plumbs the NICs on the node's own networks; nil
	// leaves every NIC to Domain.ResolveBridge.
	Networks NetworkSetup
	// Disks, when set, makes and removes the files of the volumes the
	// node prepares (Domain.ResolveVolume gives their paths); nil
	// prepares none.
	Disks DiskSetup
}

// DefaultOptions gives the options for node: domain.DefaultOptions(), 30 s
// grace periods, a 5 s retry, the wall clock and no logging.
func DefaultOptions(node string) Options {
	return Options{
		NodeName:           node,
		Domain:             domain.DefaultOptions(),
		DefaultGracePeriod: 30 * time.Second,
		OrphanGracePeriod:  30 * time.Second,
		RetryAfter:         5 * time.Second,
		Now:                time.Now,
		Log:                logr.Discard(),
	}
}

// Agent converges one node's domains on its VMIs. Reconcile must not be
// called concurrently.
type Agent struct {
	hv        hypervisor.Hypervisor
	opts      Options
	shutdowns map[string]time.Time // domain name -> destroy deadline
	plumbed   map[string]types.UID // domain name -> VMI whose networks are plumbed or checked
	tornDown  map[types.UID]bool   // VMIs whose networks and disks were released since the domain went
	// ctx bounds the disk preparation of a pass (Run's context; Background
	// for a Reconcile called directly).
	ctx context.Context
	// parsed keeps the domains' parsed XML between passes.
	parsed domainCache
}

// New gives an agent driving hv with opts.
func New(hv hypervisor.Hypervisor, opts Options) *Agent {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Agent{hv: hv, opts: opts, shutdowns: map[string]time.Time{}, plumbed: map[string]types.UID{}, tornDown: map[types.UID]bool{}, ctx: context.Background()}
}

// Report is the outcome for one VMI: the status the agent computed (the
// VMI's status with phase, nodeName, conditions, interfaces, machine and
// phase transition times updated) and, for a VMI being deleted, whether
// its domain is gone so that its finalizer can be removed.
type Report struct {
	Namespace, Name string
	UID             types.UID
	Status          kubevirtv1.VirtualMachineInstanceStatus
	Removed         bool
}

// Result is the outcome of one Reconcile: a Report per VMI handled, the
// orphan domains being removed, the errors met (each names the VMI or
// domain), and when to run again: Requeue means as soon as the reports are
// stored (a status must be recorded before the next step), RequeueAfter
// when a grace period or a retry is due (0: nothing pending).
type Result struct {
	Reports      []Report
	Orphans      []string
	Errors       []error
	Requeue      bool
	RequeueAfter time.Duration
}

func (r *Result) after(d time.Duration) {
	if d <= 0 {
		r.Requeue = true
		return
	}
	if r.RequeueAfter == 0 || d < r.RequeueAfter {
		r.RequeueAfter = d
	}
}

// Reconcile converges the hypervisor's domains on vmis (the VMIs assigned
// to this node, with their last reported status) and returns what to
// report. It never modifies vmis.
func (a *Agent) Reconcile(vmis []*kubevirtv1.VirtualMachineInstance) Result {
	var res Result
	defer a.parsed.endPass()
	doms, err := a.hv.List()
	if err != nil {
		res.Errors = append(res.Errors, err)
		res.after(a.opts.RetryAfter)
		if doms == nil {
			return res
		}
	}
	byName := map[string]hypervisor.Domain{}
	// meta and ours: each domain's converge metadata, read once a pass
	meta, ours := map[string]domain.Metadata{}, map[string]bool{}
	for _, d := range doms {
		byName[d.Name] = d
		meta[d.Name], ours[d.Name] = domain.MetadataOf(d.XML)
	}
	claimed := map[string]bool{}
	for _, vmi := range vmis {
		if vmi.Status.NodeName != "" && vmi.Status.NodeName != a.opts.NodeName {
			continue
		}
		name := domain.Name(vmi.Namespace, vmi.Name)
		d, exists := byName[name]
		if exists {
			if m := meta[name]; ours[name] && m.UID == string(vmi.UID) {
				claimed[name] = true
			} else if ours[name] {
				// a domain left by an older VMI of the same name: the orphan
				// pass removes it, this VMI waits for it to go
				res.after(a.opts.RetryAfter)
				res.Reports = append(res.Reports, a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
					a.setReady(st, false, "PreviousDomainPresent", fmt.Sprintf("domain %s of an earlier VMI %s/%s (uid %s) is being removed", name, m.Namespace, m.Name, m.UID))
				}))
				continue
			} else {
				claimed[name] = true // not ours: never touched
				res.Reports = append(res.Reports, a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
					a.fail(st, "DomainConflict", fmt.Sprintf("libvirt domain %s exists and was not created by converge", name))
				}))
				continue
			}
		}
		rep := a.reconcileVMI(vmi, name, d, exists, &res)
		res.Reports = append(res.Reports, rep)
	}
	for _, d := range doms {
		if claimed[d.Name] {
			continue
		}
		if !ours[d.Name] {
			continue
		}
		res.Orphans = append(res.Orphans, d.Name)
		gone, _, err := a.stop(d, a.opts.OrphanGracePeriod, &res)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("orphan domain %s: %w", d.Name, err))
			res.after(a.opts.RetryAfter)
		}
		if m := meta[d.Name]; gone {
			a.teardown(m.Namespace, m.Name, types.UID(m.UID), d.Name, &res)
		}
	}
	sort.Strings(res.Orphans)
	listed := map[types.UID]bool{}
	for _, vmi := range vmis {
		listed[vmi.UID] = true
	}
	if a.opts.Disks != nil && err == nil {
		withDomain := map[types.UID]bool{}
		for _, d := range doms {
			if ours[d.Name] {
				withDomain[types.UID(meta[d.Name].UID)] = true
			}
		}
		if err := a.opts.Disks.Sweep(func(uid types.UID) bool { return listed[uid] || withDomain[uid] }); err != nil {
			res.Errors = append(res.Errors, err)
		}
	}
	for uid := range a.tornDown {
		if !listed[uid] {
			delete(a.tornDown, uid) // forget VMIs gone from the source
		}
	}
	return res
}

func (a *Agent) reconcileVMI(vmi *kubevirtv1.VirtualMachineInstance, name string, d hypervisor.Domain, exists bool, res *Result) Report {
	id := vmi.Namespace + "/" + vmi.Name
	deleting := vmi.DeletionTimestamp != nil
	final := vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed
	if deleting || final {
		rep := a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
			if deleting {
				a.setReady(st, false, "Deleting", "the VMI is being deleted")
			}
		})
		if !exists {
			delete(a.shutdowns, name)
			released := a.teardown(vmi.Namespace, vmi.Name, vmi.UID, name, res)
			rep.Removed = deleting && released
			return rep
		}
		grace := a.gracePeriod(vmi)
		if final && !deleting {
			grace = 0 // the VMI is over: whatever runs now is not it
		}
		gone, last, err := a.stop(d, grace, res)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: %w", id, err))
			res.after(a.opts.RetryAfter)
			return rep
		}
		if gone {
			released := a.teardown(vmi.Namespace, vmi.Name, vmi.UID, name, res)
			rep.Removed = deleting && released
			if deleting && !final {
				a.setPhase(&rep.Status, stoppedPhase(last), string(last.Reason))
			}
		}
		return rep
	}

	if !exists {
		if started(vmi.Status.Phase) {
			a.teardown(vmi.Namespace, vmi.Name, vmi.UID, name, res)
			return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
				a.fail(st, "DomainVanished", fmt.Sprintf("domain %s vanished while the VMI ran", name))
			})
		}
		dopts := a.opts.Domain
		delete(a.tornDown, vmi.UID) // what is set up below is released at the end
		if a.opts.Networks != nil {
			taps, err := a.opts.Networks.Setup(vmi)
			if err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: %w", id, err))
				res.after(a.opts.RetryAfter)
				return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
					a.setPhase(st, kubevirtv1.Scheduled, "")
					a.setReady(st, false, "NetworkSetupFailed", err.Error())
				})
			}
			dopts.ResolveTap = func(_ string, n kubevirtv1.Network) (domain.Tap, bool, error) {
				t, ok := taps[n.Name]
				return t, ok, nil
			}
		}
		built, err := domain.Build(vmi, dopts)
		if errors.Is(err, domain.ErrVolumeNotReady) {
			return a.volumesNotReady(vmi, id, err, res)
		}
		if err != nil {
			a.teardown(vmi.Namespace, vmi.Name, vmi.UID, name, res)
			return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
				a.setCondition(st, kubevirtv1.VirtualMachineInstanceSynchronized, false, "Unsupported", err.Error())
				a.fail(st, "Unsupported", err.Error())
			})
		}
		if a.opts.Disks != nil {
			err := a.opts.Disks.Prepare(a.ctx, vmi)
			if errors.Is(err, domain.ErrVolumeNotReady) { // a containerDisk still pulling
				return a.volumesNotReady(vmi, id, err, res)
			}
			if err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: %w", id, err))
				res.after(a.opts.RetryAfter)
				return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
					a.setPhase(st, kubevirtv1.Scheduled, "")
					a.setReady(st, false, "DiskSetupFailed", err.Error())
				})
			}
		}
		xml, err := built.Marshal()
		if err == nil {
			err = a.hv.Define(xml)
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: %w", id, err))
			res.after(a.opts.RetryAfter)
			return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
				a.setPhase(st, kubevirtv1.Scheduled, "")
				a.setReady(st, false, "DefineFailed", err.Error())
			})
		}
		a.opts.Log.Info("defined", "vmi", id, "domain", name)
		// just defined: shut off, never started (no lookup needed; the
		// one after Start reads the domain as it runs)
		d = hypervisor.Domain{Name: name, State: hypervisor.Shutoff, Reason: hypervisor.ReasonNone}
	}

	startedHere := false
	if d.State == hypervisor.Shutoff && d.Reason == hypervisor.ReasonNone && !started(vmi.Status.Phase) {
		if err := a.hv.Start(name); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: %w", id, err))
			res.after(a.opts.RetryAfter)
			return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
				a.setPhase(st, kubevirtv1.Scheduled, "")
				a.setReady(st, false, "StartFailed", err.Error())
			})
		}
		a.opts.Log.Info("started", "vmi", id, "domain", name)
		startedHere = true
		var err error
		if d, err = a.hv.Lookup(name); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: %w", id, err))
			res.after(a.opts.RetryAfter)
			return a.report(vmi, nil)
		}
	}
	netErr := a.plumb(vmi, name, d, startedHere)
	if netErr != nil {
		res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s: %w", id, netErr))
		res.after(a.opts.RetryAfter)
	}
	return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		a.observe(st, vmi, d, res)
		a.expandDisks(st, vmi, d, res)
		if netErr != nil && st.Phase == kubevirtv1.Running {
			a.setReady(st, false, "NetworkNotReady", netErr.Error())
		}
	})
}

// plumb binds the VMI's networks once its domain runs: Plumb for a domain
// this pass started, Check for one found running (an agent restart), once
// per domain and VMI in the agent's life.
func (a *Agent) plumb(vmi *kubevirtv1.VirtualMachineInstance, name string, d hypervisor.Domain, startedHere bool) error {
	if a.opts.Networks == nil || a.plumbed[name] == vmi.UID {
		return nil
	}
	if d.State != hypervisor.Running && d.State != hypervisor.Paused {
		return nil
	}
	var err error
	if startedHere {
		err = a.opts.Networks.Plumb(vmi)
	} else {
		err = a.opts.Networks.Check(vmi)
	}
	if err != nil {
		return err
	}
	a.plumbed[name] = vmi.UID
	a.opts.Log.Info("networks plumbed", "vmi", vmi.Namespace+"/"+vmi.Name, "domain", name, "checked", !startedHere)
	return nil
}

// teardown releases a VMI's networks and disks once its domain is gone;
// it reports whether that is done (always true without Options.Networks
// and Options.Disks). Errors go to res with a retry, which runs both
// again (each is idempotent).
func (a *Agent) teardown(namespace, vmiName string, uid types.UID, domainName string, res *Result) bool {
	delete(a.plumbed, domainName)
	if a.opts.Networks == nil && a.opts.Disks == nil || a.tornDown[uid] {
		return true
	}
	var errs []error
	if a.opts.Networks != nil {
		if err := a.opts.Networks.Teardown(namespace, vmiName, uid); err != nil {
			errs = append(errs, err)
		} else {
			a.opts.Log.Info("networks torn down", "vmi", namespace+"/"+vmiName, "uid", uid)
		}
	}
	if a.opts.Disks != nil {
		if err := a.opts.Disks.Release(namespace, vmiName, uid); err != nil {
			errs = append(errs, err)
		} else {
			a.opts.Log.Info("disks released", "vmi", namespace+"/"+vmiName, "uid", uid)
		}
	}
	if len(errs) > 0 {
		for _, err := range errs {
			res.Errors = append(res.Errors, fmt.Errorf("VirtualMachineInstance %s/%s: %w", namespace, vmiName, err))
		}
		res.after(a.opts.RetryAfter)
		return false
	}
	a.tornDown[uid] = true
	return true
}

// observe sets the status from a domain that exists.
func (a *Agent) observe(st *kubevirtv1.VirtualMachineInstanceStatus, vmi *kubevirtv1.VirtualMachineInstance, d hypervisor.Domain, res *Result) {
	x, _ := a.parsed.parse(d)
	if x.OS != nil && x.OS.Type != nil && x.OS.Type.Machine != "" {
		st.Machine = &kubevirtv1.Machine{Type: x.OS.Type.Machine}
	}
	st.Interfaces = interfaces(vmi, x)
	switch d.State {
	case hypervisor.Running:
		a.setPhase(st, kubevirtv1.Running, "")
		a.setReady(st, true, "", "")
	case hypervisor.Paused:
		a.setPhase(st, kubevirtv1.Running, "")
		a.setReady(st, false, "Paused", "the domain is paused")
	case hypervisor.ShuttingDown:
		a.setPhase(st, kubevirtv1.Running, "")
		a.setReady(st, false, "ShuttingDown", "the guest is shutting down")
	case hypervisor.Shutoff, hypervisor.Crashed:
		a.setPhase(st, stoppedPhase(d), string(d.Reason))
		a.setReady(st, false, "Stopped", stopMessage(d))
		res.after(0) // record the final phase, then remove the domain
	default:
		a.setReady(st, false, "UnknownState", fmt.Sprintf("domain %s is in state %s", d.Name, d.State))
		res.after(a.opts.RetryAfter)
	}
}

func stoppedPhase(d hypervisor.Domain) kubevirtv1.VirtualMachineInstancePhase {
	if d.State == hypervisor.Shutoff && d.Reason == hypervisor.ReasonShutdown {
		return kubevirtv1.Succeeded
	}
	return kubevirtv1.Failed
}

func stopMessage(d hypervisor.Domain) string {
	if d.State == hypervisor.Crashed {
		return fmt.Sprintf("domain %s crashed", d.Name)
	}
	if d.Reason == hypervisor.ReasonShutdown {
		return fmt.Sprintf("the guest of domain %s powered off", d.Name)
	}
	reason := string(d.Reason)
	if reason == "" {
		reason = "unknown"
	}
	return fmt.Sprintf("domain %s stopped (reason %s)", d.Name, reason)
}

// started reports whether a VMI in phase p has had its domain started.
func started(p kubevirtv1.VirtualMachineInstancePhase) bool {
	switch p {
	case "", kubevirtv1.Pending, kubevirtv1.Scheduling, kubevirtv1.Scheduled:
		return false
	}
	return true
}

func (a *Agent) gracePeriod(vmi *kubevirtv1.VirtualMachineInstance) time.Duration {
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return a.opts.DefaultGracePeriod
}

// stop takes a domain down: an ACPI shutdown first, Destroy once grace has
// passed since (at once when grace is 0), then Undefine. gone is true once
// the domain no longer exists; last is the domain as last seen, with the
// reason it stopped.
func (a *Agent) stop(d hypervisor.Domain, grace time.Duration, res *Result) (gone bool, last hypervisor.Domain, err error) {
	now, name := a.opts.Now(), d.Name
	switch d.State {
	case hypervisor.Running, hypervisor.Paused, hypervisor.ShuttingDown, hypervisor.Unknown:
		deadline, asked := a.shutdowns[name]
		switch {
		case grace > 0 && !asked:
			if d.State != hypervisor.Paused {
				if err := a.hv.Shutdown(name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
					return false, d, err
				}
				a.opts.Log.Info("shutdown requested", "domain", name, "grace", grace)
			}
			a.shutdowns[name] = now.Add(grace)
			// the guest may have powered off already
			after, err := a.hv.Lookup(name)
			if errors.Is(err, hypervisor.ErrNotFound) {
				delete(a.shutdowns, name)
				return true, d, nil
			} else if err != nil {
				return false, d, err
			}
			d = after
			if d.State != hypervisor.Shutoff && d.State != hypervisor.Crashed {
				res.after(grace)
				return false, d, nil
			}
		case grace > 0 && now.Before(deadline):
			res.after(deadline.Sub(now))
			return false, d, nil
		default:
			if err := a.hv.Destroy(name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
				return false, d, err
			}
			a.opts.Log.Info("destroyed", "domain", name)
			d.State, d.Reason = hypervisor.Shutoff, hypervisor.ReasonDestroyed
		}
	}
	if err := a.hv.Undefine(name); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
		return false, d, err
	}
	a.opts.Log.Info("undefined", "domain", name)
	delete(a.shutdowns, name)
	return true, d, nil
}

// report copies the VMI's status, sets the node name and applies f.
// volumesNotReady reports vmi (id "<namespace>/<name>") Scheduled and not
// Ready, reason VolumesNotReady with err's message (domain.ErrVolumeNotReady:
// a claim not bound, a DataVolume not Succeeded, a containerDisk still
// pulling), and asks to run again after RetryAfter.
func (a *Agent) volumesNotReady(vmi *kubevirtv1.VirtualMachineInstance, id string, err error, res *Result) Report {
	a.opts.Log.Info("volumes not ready", "vmi", id, "reason", err.Error())
	res.after(a.opts.RetryAfter)
	return a.report(vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		a.setPhase(st, kubevirtv1.Scheduled, "")
		a.setReady(st, false, "VolumesNotReady", err.Error())
	})
}

func (a *Agent) report(vmi *kubevirtv1.VirtualMachineInstance, f func(*kubevirtv1.VirtualMachineInstanceStatus)) Report {
	st := *vmi.Status.DeepCopy()
	st.NodeName = a.opts.NodeName
	if f != nil {
		f(&st)
	}
	return Report{Namespace: vmi.Namespace, Name: vmi.Name, UID: vmi.UID, Status: st}
}

func (a *Agent) fail(st *kubevirtv1.VirtualMachineInstanceStatus, reason, message string) {
	a.setPhase(st, kubevirtv1.Failed, reason)
	a.setReady(st, false, reason, message)
}

// setPhase sets the phase (and status.reason) and records a phase
// transition time when the phase changes.
func (a *Agent) setPhase(st *kubevirtv1.VirtualMachineInstanceStatus, p kubevirtv1.VirtualMachineInstancePhase, reason string) {
	if st.Phase == p {
		return
	}
	st.Phase, st.Reason = p, reason
	st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps, kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{
		Phase: p, PhaseTransitionTimestamp: metav1.NewTime(a.opts.Now()),
	})
}

func (a *Agent) setReady(st *kubevirtv1.VirtualMachineInstanceStatus, ready bool, reason, message string) {
	a.setCondition(st, kubevirtv1.VirtualMachineInstanceReady, ready, reason, message)
}

// setCondition sets a condition, keeping its transition time when its
// status does not change.
func (a *Agent) setCondition(st *kubevirtv1.VirtualMachineInstanceStatus, t kubevirtv1.VirtualMachineInstanceConditionType, ok bool, reason, message string) {
	status := "False"
	if ok {
		status = "True"
	}
	c := kubevirtv1.VirtualMachineInstanceCondition{Type: t, Status: corev1.ConditionStatus(status), Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(a.opts.Now())}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// interfaces gives the status interfaces of the spec's interfaces, with the
// MAC the domain really has (found by the user alias ua-<name>, or by
// position when the hypervisor drops aliases).
func interfaces(vmi *kubevirtv1.VirtualMachineInstance, x *liveDomain) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	if x.Devices == nil || len(vmi.Spec.Domain.Devices.Interfaces) == 0 {
		return nil
	}
	byAlias := map[string]string{}
	for _, nic := range x.Devices.Interfaces {
		if nic.Alias != nil && nic.MAC != nil {
			byAlias[nic.Alias.Name] = nic.MAC.Address
		}
	}
	var out []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for i, iface := range vmi.Spec.Domain.Devices.Interfaces {
		mac, ok := byAlias["ua-"+iface.Name]
		if !ok && i < len(x.Devices.Interfaces) && x.Devices.Interfaces[i].MAC != nil {
			mac = x.Devices.Interfaces[i].MAC.Address
		}
		out = append(out, kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: iface.Name, MAC: mac, InfoSource: "domain"})
	}
	return out
}
