package hostpath

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/moby/sys/mountinfo"
	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
)

// TestSanity runs csi-sanity (csi-test v5.6.0) against the real driver on a
// unix socket, once with filesystem and once with block volumes of 1 MiB
// (expanded by 1 GiB, sparse), with expansion, snapshots and clones
// claimed, and logs the pass/fail/skip counts; a spec skipped for a
// capability the driver claims fails it (see unclaimedSkips). Afterwards nothing may be left
// mounted under the test directories, no loop device may be attached, and
// the pools must be empty.
func TestSanity(t *testing.T) {
	requireRoot(t)
	type run struct {
		access, dir string
		cfg         sanity.TestConfig
		sc          *sanity.TestContext
	}
	var runs []*run
	for _, access := range []string{"mount", "block"} {
		dir := t.TempDir()
		startDriver(t, testOptions(dir))
		cfg := sanity.NewTestConfig()
		cfg.Address = "unix://" + filepath.Join(dir, "csi.sock")
		cfg.TargetPath = filepath.Join(dir, "target")   // created by csi-sanity
		cfg.StagingPath = filepath.Join(dir, "staging") // created by csi-sanity
		cfg.TestVolumeSize = 1 << 20
		cfg.TestVolumeAccessType = access
		runs = append(runs, &run{access: access, dir: dir, cfg: cfg})
	}
	for _, r := range runs {
		Describe(r.access, func() { r.sc = sanity.GinkgoTest(&r.cfg) })
	}
	var report Report
	ReportAfterSuite("hostpath CSI sanity counts", func(r Report) { report = r })
	gomega.RegisterFailHandler(Fail)
	suiteCfg, reporterCfg := GinkgoConfiguration()
	reporterCfg.NoColor = true
	RunSpecs(t, "hostpath CSI sanity", suiteCfg, reporterCfg)
	for _, r := range runs {
		if r.sc != nil {
			r.sc.Finalize()
		}
	}

	counts := map[string]map[types.SpecState]int{}
	skips := map[string]int{} // why specs were skipped, both runs
	for _, s := range report.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		access := "?"
		if len(s.ContainerHierarchyTexts) > 0 {
			access = s.ContainerHierarchyTexts[0]
		}
		if counts[access] == nil {
			counts[access] = map[types.SpecState]int{}
		}
		counts[access][s.State]++
		if s.State == types.SpecStateSkipped {
			skips[s.Failure.Message]++
		}
	}
	for _, r := range runs {
		c := counts[r.access]
		t.Logf("csi-sanity %s volumes: %d passed, %d failed, %d skipped, %d pending (in %s for both runs)",
			r.access, c[types.SpecStatePassed], c[types.SpecStateFailed]+c[types.SpecStatePanicked]+c[types.SpecStateTimedout],
			c[types.SpecStateSkipped], c[types.SpecStatePending], report.RunTime)
		if c[types.SpecStatePassed] == 0 {
			t.Errorf("csi-sanity %s: no spec passed", r.access)
		}
	}

	for _, why := range slices.Sorted(maps.Keys(skips)) {
		t.Logf("csi-sanity skipped %d specs (both runs): %s", skips[why], why)
		if !unclaimedSkips[why] {
			t.Errorf("csi-sanity skipped %d specs for %q: not a capability the driver leaves unclaimed", skips[why], why)
		}
	}
	for _, r := range runs {
		mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(r.dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mounts {
			t.Errorf("csi-sanity %s: left mounted: %s", r.access, m.Mountpoint)
		}
		entries, err := os.ReadDir(filepath.Join(r.dir, "pool"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("csi-sanity %s: left in pool: %s", r.access, e.Name())
		}
	}
	for _, r := range runs {
		if loops := loopsUnder(t, r.dir); len(loops) > 0 {
			t.Errorf("csi-sanity %s: loop devices left attached: %v", r.access, loops)
		}
	}
}

// unclaimedSkips are the csi-sanity skip reasons of capabilities the driver
// does not claim (no ControllerPublish, staging, health, ModifyVolume,
// group snapshots, snapshot topology). A skip for any other reason means a
// claimed capability went untested, and fails TestSanity.
var unclaimedSkips = map[string]bool{
	"Controller Publish, UnpublishVolume not supported": true,
	"ControllerPublishVolume not supported":             true,
	"ControllerUnpublishVolume not supported":           true,
	"ControllerGetVolumeHealth not supported":           true,
	"ControllerListVolumeHealth not supported":          true,
	"NodeGetVolumeHealth not supported":                 true,
	"NodeGetStorageHealth not supported":                true,
	"ControllerModifyVolume not supported":              true,
	"Modify Volume not supported":                       true,
	"Modify volume not supported":                       true,
	"NodeStageVolume not supported":                     true,
	"NodeUnstageVolume not supported":                   true,
	"GroupControllerService not supported":              true,
	"SNAPSHOT_ACCESSIBILITY_CONSTRAINTS not supported":  true,
}

// loopsUnder returns the attached loop devices whose backing file is
// under dir (deleted files included), as "loopN: path".
func loopsUnder(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		if backing := strings.TrimSpace(string(b)); strings.HasPrefix(backing, dir+"/") {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(f)))+": "+backing)
		}
	}
	return out
}
