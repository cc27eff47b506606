package hostpath

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// volumeKey and snapshotKey name a volume or snapshot in Driver.pending.
func volumeKey(id string) string   { return "volume " + id }
func snapshotKey(id string) string { return "snapshot " + id }

// checkPending gives Aborted (the CSI code for "an operation is pending for
// this volume") when a copy into or out of one of keys is running. The
// caller holds the lock.
func (d *Driver) checkPending(keys ...string) error {
	for _, k := range keys {
		if d.pending[k] > 0 {
			return status.Errorf(codes.Aborted, "%s: a copy into or out of it is running; retry", k)
		}
	}
	return nil
}

// copyUnlocked runs copy (the data copy of a clone, restore or snapshot,
// which can take long on a filesystem without reflink) without the
// driver's lock, so the driver's other calls go on meanwhile, with keys
// (the new record and its source) marked pending: deleting or expanding
// them, or creating the new record again, is Aborted until it ends. The
// caller holds the lock, and holds it again when copyUnlocked returns.
func (d *Driver) copyUnlocked(keys []string, copy func() error) error {
	for _, k := range keys {
		d.pending[k]++
	}
	d.mu.Unlock()
	if d.copyHook != nil {
		d.copyHook()
	}
	err := copy()
	d.mu.Lock()
	for _, k := range keys {
		if d.pending[k]--; d.pending[k] == 0 {
			delete(d.pending, k)
		}
	}
	return err
}
