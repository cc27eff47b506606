package agent_test

import (
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/hypervisor"
)

// sizedDisks is the test driver with disk capacities of its own: a
// domain's disks have the sizes of capacity (by target device), and
// BlockResize sets them and is recorded.
type sizedDisks struct {
	hypervisor.Hypervisor
	capacity map[string]uint64
	resized  []string
}

func (s *sizedDisks) BlockCapacity(_, dev string) (uint64, error) { return s.capacity[dev], nil }

func (s *sizedDisks) BlockResize(_, dev string, bytes uint64) error {
	s.capacity[dev] = bytes
	s.resized = append(s.resized, dev)
	return nil
}

// TestDiskExpansion: the disks of a running VMI's claims follow the
// claims' capacity as KubeVirt's ExpandDisks: a raw writable disk smaller
// than its claim's capacity is grown to it (blockresize), never shrunk,
// nor grown when read-only or when the capacity is unknown; a dataVolume
// volume counts as its claim. status.volumeStatus has each claim's
// volume with its target, claim, capacity and the disk's size.
func TestDiskExpansion(t *testing.T) {
	const mi = 1 << 20
	caps := map[string]int64{"grow": 4 * mi, "same": 1 * mi, "smaller": 1 * mi, "ro": 4 * mi, "unknown": 0, "dv": 8 * mi}
	hv := &sizedDisks{Hypervisor: privateNode(t), capacity: map[string]uint64{"vda": mi, "vdb": mi, "vdc": 2 * mi, "vdd": mi, "vde": mi, "vdf": mi}}
	o := options(&clock{t: time.Unix(1000, 0)})
	o.Domain.ResolvePVC = func(_, claim string) (domain.DiskSource, error) {
		return domain.DiskSource{Path: "/pool/" + claim + "/data/disk.img", Capacity: caps[claim]}, nil
	}
	var vols []kubevirtv1.Volume
	for _, n := range []string{"grow", "same", "smaller", "ro", "unknown"} {
		v := kubevirtv1.Volume{Name: n, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}}
		v.PersistentVolumeClaim.ClaimName, v.PersistentVolumeClaim.ReadOnly = n, n == "ro"
		vols = append(vols, v)
	}
	vols = append(vols, kubevirtv1.Volume{Name: "dv", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "dv"}}})
	src := agent.NewStaticSource(withVolumes(newVMI("db", 30), vols...))
	settle(t, agent.New(hv, o), src)

	if got, want := hv.resized, []string{"vda", "vdf"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("resized %v, want %v", got, want)
	}
	want := map[string]struct {
		dev  string
		size int64
	}{"grow": {"vda", 4 * mi}, "same": {"vdb", mi}, "smaller": {"vdc", 2 * mi}, "ro": {"vdd", mi}, "unknown": {"vde", mi}, "dv": {"vdf", 8 * mi}}
	st := src.Get("ns", "db").Status
	if st.Phase != kubevirtv1.Running || len(st.VolumeStatus) != len(want) {
		t.Fatalf("phase %s, volumeStatus %+v; want Running and %d entries", st.Phase, st.VolumeStatus, len(want))
	}
	for _, vs := range st.VolumeStatus {
		w := want[vs.Name]
		info := vs.PersistentVolumeClaimInfo
		if vs.Target != w.dev || vs.Size != w.size || info == nil || info.ClaimName != vs.Name {
			t.Errorf("volumeStatus %s: target %s size %d info %+v, want %s %d claim %s", vs.Name, vs.Target, vs.Size, info, w.dev, w.size, vs.Name)
			continue
		}
		if c := info.Capacity.Storage(); c.Value() != caps[vs.Name] {
			t.Errorf("volumeStatus %s: capacity %s, want %d", vs.Name, c.String(), caps[vs.Name])
		}
	}
}
