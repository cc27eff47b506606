// Package hypervisor is the interface between converge's VM agent and the
// hypervisor that runs its domains: libvirt in production (package
// nodeplane/vm/libvirt, the only one that uses cgo) and libvirt's test
// driver in tests. It has no cgo, so the agent and its unit tests build
// without libvirt-dev.
package hypervisor

import (
	"context"
	"errors"
)

// ErrNotFound is wrapped by Hypervisor methods when the named domain does
// not exist.
var ErrNotFound = errors.New("domain not found")

// State is a domain's run state, as libvirt's virDomainState folded to what
// the agent acts on.
type State string

const (
	Running      State = "Running"      // running or blocked
	Paused       State = "Paused"       // paused or PM-suspended
	ShuttingDown State = "ShuttingDown" // the guest is shutting down
	Shutoff      State = "Shutoff"      // defined, not running
	Crashed      State = "Crashed"      // crashed and kept (on_crash preserve)
	Unknown      State = "Unknown"      // libvirt's NOSTATE or a newer state
)

// Reason is why a domain is Shutoff (libvirt's virDomainShutoffReason,
// folded).
type Reason string

const (
	ReasonNone      Reason = ""          // defined and never started, or unknown
	ReasonShutdown  Reason = "Shutdown"  // the guest powered off
	ReasonDestroyed Reason = "Destroyed" // destroyed from outside the guest
	ReasonCrashed   Reason = "Crashed"   // the guest crashed
	ReasonFailed    Reason = "Failed"    // the hypervisor failed to start or keep it
	ReasonOther     Reason = "Other"     // migrated, saved, daemon, snapshot
)

// Domain is what the agent knows of one domain: its name and UUID, its
// state, and its full definition (libvirt's live XML when it runs) for the
// converge metadata and the interfaces' MACs.
type Domain struct {
	Name   string
	UUID   string
	State  State
	Reason Reason
	XML    string
}

// Event says that a domain's lifecycle changed (libvirt's lifecycle
// event, virDomainEventType); the agent re-reads the domain rather than
// trusting the payload.
//
// Type is one of libvirt's lifecycle events: Defined, Undefined, Started,
// Suspended, Resumed, Stopped, Shutdown, PMSuspended, Crashed; or
// Reconnected (EventReconnected), which is no domain's: the connection to
// the hypervisor was lost and opened again (libvirtd restarted), events of
// the time it was away are lost, and Name is empty. A receiver re-reads
// every domain on it.
type Event struct {
	Name   string // the domain's name; "" for Reconnected
	Type   string // see above
	Detail string // the hypervisor's description, for logs
}

// EventReconnected is the Event.Type of a reconnection to the hypervisor
// (nodeplane/vm/libvirt sends it on every Events channel after it
// re-registered it on a new connection).
const EventReconnected = "Reconnected"

// Hypervisor defines, runs and removes domains. Every method names the
// domain by its name; errors are wrapped with the domain name and the
// operation, and wrap ErrNotFound when the domain does not exist.
type Hypervisor interface {
	// Define creates or replaces the persistent definition from domain XML.
	Define(xml string) error
	// Start boots a defined domain that is not running.
	Start(name string) error
	// Shutdown asks the guest to power off (ACPI) and returns at once.
	Shutdown(name string) error
	// Destroy stops the domain immediately, like pulling the plug.
	Destroy(name string) error
	// Undefine removes a domain's definition (and its NVRAM); a running
	// domain must be destroyed first.
	Undefine(name string) error
	// Lookup gives one domain.
	Lookup(name string) (Domain, error)
	// List gives every domain of the connection, converge's or not.
	List() ([]Domain, error)
	// BlockCapacity gives the capacity in bytes the running domain's disk
	// of target device dev ("vda") has (libvirt virDomainGetBlockInfo).
	BlockCapacity(name, dev string) (uint64, error)
	// BlockResize grows the running domain's disk of target device dev to
	// bytes, online (libvirt virDomainBlockResize with
	// VIR_DOMAIN_BLOCK_RESIZE_BYTES: QEMU's block_resize, which extends a
	// raw file and tells the guest the new size). The guest's device
	// grows; its partitions and filesystems do not.
	BlockResize(name, dev string, bytes uint64) error
	// Events delivers lifecycle events until ctx ends, then closes the
	// channel. Events may be dropped when the receiver lags: they are only
	// a hint to look again.
	Events(ctx context.Context) (<-chan Event, error)
}
