package kvmprobe

import "context"

// Options configure Probe.
type Options struct {
	Paths Paths
	Guest GuestOptions
}

// DefaultOptions gives the host's paths and DefaultGuestOptions.
func DefaultOptions() Options {
	return Options{Paths: DefaultPaths(), Guest: DefaultGuestOptions()}
}

// Probe reads the static facts, runs the probe guest under KVM when the
// device exists (bounded by o.Guest.Timeout, whatever the facts say, so
// the message reports both), and decides (Decide).
func Probe(ctx context.Context, o Options) Result {
	f := ReadFacts(o.Paths)
	var g Guest
	if f.Device {
		g = RunGuest(ctx, o.Guest)
	}
	return Decide(f, g)
}
