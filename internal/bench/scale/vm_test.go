package scale

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/bench/curve"
	"github.com/converge-dev/converge/internal/bench/measure"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/crdtest"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// defaultVMSizes is the sweep of `make bench-scale`; fullVMSizes that of
// `make bench-scale SCALE=full` (CONVERGE_SCALE=full), adding 1000 VMs
// over 50 nodes (about 2.5 min more here). CONVERGE_SCALE_VMS overrides
// both.
const (
	defaultVMSizes = "100/5,250/10,500/25"
	fullVMSizes    = defaultVMSizes + ",1000/50"
)

// vmFigures are one size's results.
type vmFigures struct {
	size                   Size
	wallS, vmsPerS         float64
	schedPerS              float64
	p50, p99               float64 // ms
	ctrlCPUS, ctrlPeakRSS  float64
	benchCPUS, cpuMsPerVM  float64
	firstRunning, lastSeen time.Duration
}

// BenchmarkVMScale creates VirtualMachines (runStrategy Always, 64 MiB,
// grace 0) on simulated nodes, for each size of the sweep
// (CONVERGE_SCALE_VMS, "VMS/NODES,…", default defaultVMSizes or, with
// CONVERGE_SCALE=full, fullVMSizes), each size
// on a fresh kube-apiserver with a fresh converge-controller process and
// fresh nodes (see the package doc). Once a warm-up VM runs (every
// controller and agent up), it creates the size's VMs from 8 goroutines and
// watches their VMIs until every one is Running, failing with the phases
// seen and the controller's log if one fails or none progresses for a
// minute. Per VM, its latency runs from just before its create request to
// the watch event showing its VMI Running (the harness's clock: the
// objects' timestamps have 1 s resolution). Reported per size: wall-s
// (first create → last Running), VMs/s, sched-VMIs/s (first VMI seen →
// last one bound to a node: virt-controller's scheduler), p50-ms and
// p99-ms, ctrl-CPU-s (converge-controller's user+system CPU over the
// window), ctrl-CPU-ms/VM with x-first (its ratio to the sweep's first
// size: 1.0 is linear cost), ctrl-peak-RSS-MiB (VmHWM, since the process
// started) and bench-CPU-s (this process: the agents, the creating client
// and the watch). The sweep's curves are written as PNGs to
// CONVERGE_BENCH_OUT (default bin/bench of the repository):
// vm-latency.png, vm-throughput.png, vm-controller.png.
func BenchmarkVMScale(b *testing.B) {
	controlplane.RequireForTest(b)
	spec := os.Getenv("CONVERGE_SCALE_VMS")
	switch {
	case spec != "":
	case os.Getenv("CONVERGE_SCALE") == "full":
		spec = fullVMSizes
	default:
		spec = defaultVMSizes
	}
	sizes, err := ParseSizes("CONVERGE_SCALE_VMS", spec)
	if err != nil {
		b.Fatal(err)
	}
	buildController(b)
	var results []vmFigures
	for _, sz := range sizes {
		b.Run(fmt.Sprintf("vms=%d/nodes=%d", sz.Objects, sz.Hosts), func(b *testing.B) {
			for range b.N { // -benchtime 1x: each size once
				f := vmScale(b, sz)
				if len(results) > 0 {
					f.reportRatio(b, results[0])
				}
				results = append(results, f)
			}
		})
	}
	if len(results) == len(sizes) && !b.Failed() {
		writeVMPlots(b, results)
	}
}

// vmScale runs one size and reports its figures.
func vmScale(b *testing.B, sz Size) vmFigures {
	b.StopTimer()
	env, err := controlplane.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	c := vmClient(b, env)
	crdtest.Install(b, c, "kubevirts", "virtualmachines", "virtualmachineinstances", "datavolumes", "hostpathprovisioners",
		"virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences")
	ctx := context.Background()
	for _, ns := range []string{"kubevirt-hyperconverged", "converge-system", "warmup", "scale"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	ctrl := startController(b, env)
	// A native KubeVirt: the virt operator starts the virt-controller role.
	kv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
		"metadata": map[string]any{"name": "kubevirt-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged",
			"annotations": map[string]any{"converge.dev/operator": "native"}},
	}}
	if err := c.Create(ctx, kv); err != nil {
		b.Fatal(err)
	}
	startNodes(b, env.Config, sz.Hosts)

	// Warm-up: one VM through the whole path, outside the window.
	if err := c.Create(ctx, scaleVM("warmup", "warmup")); err != nil {
		b.Fatal(err)
	}
	warm := &kubevirtv1.VirtualMachineInstance{}
	start := time.Now()
	for c.Get(ctx, client.ObjectKey{Namespace: "warmup", Name: "warmup"}, warm) != nil || warm.Status.Phase != kubevirtv1.Running {
		ctrl.check(b)
		if time.Since(start) > 3*time.Minute {
			b.Fatalf("warm-up VM not Running after 3 min (VMI phase %q)\ncontroller log:\n%s", warm.Status.Phase, ctrl.tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Logf("warm-up VM Running %s after the KubeVirt (operator start, %d nodes registered)", time.Since(start).Round(time.Millisecond), sz.Hosts)

	w := watchVMIs(b, env, "scale")
	cpu0, bench0 := ctrl.cpu(b), selfCPU(b)
	issued := make([]time.Time, sz.Objects)
	b.StartTimer()
	t0 := time.Now()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range sz.Objects {
		g.Go(func() error {
			issued[i] = time.Now()
			return c.Create(ctx, scaleVM("scale", vmName(i)))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	running := w.wait(b, sz.Objects, ctrl)
	b.StopTimer()
	f := vmFigures{size: sz}
	var lat []time.Duration
	var last time.Time
	for i := range sz.Objects {
		r := running[vmName(i)]
		lat = append(lat, r.Sub(issued[i]))
		if r.After(last) {
			last = r
		}
	}
	f.wallS = last.Sub(t0).Seconds()
	f.vmsPerS = float64(sz.Objects) / f.wallS
	firstSeen, lastBound := w.span()
	f.schedPerS = float64(sz.Objects) / lastBound.Sub(firstSeen).Seconds()
	if f.p50, err = measure.Percentile(lat, 50); err != nil {
		b.Fatal(err)
	}
	if f.p99, err = measure.Percentile(lat, 99); err != nil {
		b.Fatal(err)
	}
	f.ctrlCPUS, f.benchCPUS = ctrl.cpu(b)-cpu0, selfCPU(b)-bench0
	f.cpuMsPerVM = f.ctrlCPUS * 1000 / float64(sz.Objects)
	f.ctrlPeakRSS = ctrl.peakRSS(b)
	for _, m := range []struct {
		v    float64
		unit string
	}{{f.wallS, "wall-s"}, {f.vmsPerS, "VMs/s"}, {f.schedPerS, "sched-VMIs/s"}, {f.p50, "p50-ms"}, {f.p99, "p99-ms"},
		{f.ctrlCPUS, "ctrl-CPU-s"}, {f.cpuMsPerVM, "ctrl-CPU-ms/VM"}, {f.ctrlPeakRSS, "ctrl-peak-RSS-MiB"}, {f.benchCPUS, "bench-CPU-s"}} {
		b.ReportMetric(m.v, m.unit)
	}
	b.Logf("%d VMs on %d nodes: %.1f s, %.1f VMs/s, scheduler %.1f VMIs/s, p50 %.0f ms, p99 %.0f ms; converge-controller %.1f CPU-s (%.1f ms/VM), peak RSS %.0f MiB; agents+harness %.1f CPU-s",
		sz.Objects, sz.Hosts, f.wallS, f.vmsPerS, f.schedPerS, f.p50, f.p99, f.ctrlCPUS, f.cpuMsPerVM, f.ctrlPeakRSS, f.benchCPUS)
	return f
}

// reportRatio reports this size's per-VM figures against the first
// size's: x-first for the controller's CPU per VM, p50-x-first for the
// median latency.
func (f vmFigures) reportRatio(b *testing.B, first vmFigures) {
	if first.cpuMsPerVM > 0 {
		b.ReportMetric(f.cpuMsPerVM/first.cpuMsPerVM, "x-first")
	}
	if first.p50 > 0 {
		b.ReportMetric(f.p50/first.p50, "p50-x-first")
	}
}

func vmName(i int) string { return fmt.Sprintf("vm-%04d", i) }

// scaleVM is a VirtualMachine that runs at once: 64 MiB, grace 0.
func scaleVM(ns, name string) *kubevirtv1.VirtualMachine {
	always := kubevirtv1.RunStrategyAlways
	grace := int64(0)
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{Resources: kubevirtv1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}},
				TerminationGracePeriodSeconds: &grace,
			}}}}
}

// vmClient gives a client of env with the client-go and KubeVirt types.
func vmClient(b *testing.B, env *controlplane.Env) client.WithWatch {
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: newScheme(b)})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// vmiWatch records, per VMI name, when the watch first saw it, saw it
// bound to a node (status.nodeName) and saw it Running.
type vmiWatch struct {
	mu                   sync.Mutex
	seen, bound, running map[string]time.Time
	phases               map[string]kubevirtv1.VirtualMachineInstancePhase
	failed               []string
	changed              chan struct{}
}

// watchVMIs watches the VMIs of namespace ns until the benchmark ends.
func watchVMIs(b *testing.B, env *controlplane.Env, ns string) *vmiWatch {
	c := vmClient(b, env)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	wi, err := c.Watch(ctx, &kubevirtv1.VirtualMachineInstanceList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	w := &vmiWatch{seen: map[string]time.Time{}, bound: map[string]time.Time{}, running: map[string]time.Time{},
		phases: map[string]kubevirtv1.VirtualMachineInstancePhase{}, changed: make(chan struct{}, 1)}
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			vmi, ok := ev.Object.(*kubevirtv1.VirtualMachineInstance)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			w.mu.Lock()
			name := vmi.Name
			if _, ok := w.seen[name]; !ok {
				w.seen[name] = now
			}
			if _, ok := w.bound[name]; !ok && vmi.Status.NodeName != "" {
				w.bound[name] = now
			}
			if _, ok := w.running[name]; !ok && vmi.Status.Phase == kubevirtv1.Running {
				w.running[name] = now
			}
			if vmi.Status.Phase == kubevirtv1.Failed && w.phases[name] != kubevirtv1.Failed {
				w.failed = append(w.failed, name)
			}
			w.phases[name] = vmi.Status.Phase
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

// wait returns the Running times once n VMIs ran; it fails when one
// fails or when none progressed for a minute, with the phases seen and
// the controller's log.
func (w *vmiWatch) wait(b *testing.B, n int, ctrl *controller) map[string]time.Time {
	progress, count := time.Now(), -1
	for {
		w.mu.Lock()
		got, failed := len(w.running), slices.Clone(w.failed)
		w.mu.Unlock()
		switch {
		case len(failed) > 0:
			b.Fatalf("VMIs Failed: %v\n%s", failed, w.summary(ctrl))
		case got >= n:
			w.mu.Lock()
			defer w.mu.Unlock()
			return maps.Clone(w.running)
		case got != count:
			progress, count = time.Now(), got
		case time.Since(progress) > time.Minute:
			b.Fatalf("%d of %d VMIs Running, none more for a minute\n%s", got, n, w.summary(ctrl))
		}
		ctrl.check(b)
		select {
		case <-w.changed:
		case <-time.After(time.Second):
		}
	}
}

// span gives when the first VMI was seen and the last one bound.
func (w *vmiWatch) span() (first, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.seen {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	for _, t := range w.bound {
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// summary counts the VMIs per phase, with the controller's log tail.
func (w *vmiWatch) summary(ctrl *controller) string {
	w.mu.Lock()
	counts := map[kubevirtv1.VirtualMachineInstancePhase]int{}
	for _, p := range w.phases {
		counts[p]++
	}
	w.mu.Unlock()
	return fmt.Sprintf("VMIs per phase: %v\ncontroller log:\n%s", counts, ctrl.tail(40))
}

// selfCPU gives this process's CPU seconds.
func selfCPU(b *testing.B) float64 {
	s, err := measure.CPUSeconds(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// outDir is where the PNGs go: CONVERGE_BENCH_OUT, else bin/bench.
func outDir(b *testing.B) string {
	if d := os.Getenv("CONVERGE_BENCH_OUT"); d != "" {
		return d
	}
	return filepath.Join(vmtest.RepoRoot(b), "bin", "bench")
}

// writeVMPlots draws the sweep's curves.
func writeVMPlots(b *testing.B, rs []vmFigures) {
	pts := func(v func(vmFigures) float64) []curve.Point {
		var ps []curve.Point
		for _, r := range rs {
			ps = append(ps, curve.Point{Size: float64(r.size.Objects), Value: v(r)})
		}
		return ps
	}
	var nodes []string
	for _, r := range rs {
		nodes = append(nodes, strconv.Itoa(r.size.Hosts))
	}
	x := "VirtualMachines (on " + strings.Join(nodes, ", ") + " simulated nodes)"
	writePlots(b, map[string]curve.Plot{
		"vm-latency.png": {Title: "VM creation → VMI Running, per VM", X: x, Y: "ms", Series: []curve.Series{
			{Name: "p50", Points: pts(func(f vmFigures) float64 { return f.p50 })},
			{Name: "p99", Points: pts(func(f vmFigures) float64 { return f.p99 })}}},
		"vm-throughput.png": {Title: "Throughput", X: x, Y: "per second", Series: []curve.Series{
			{Name: "VMs Running/s (creation → all Running)", Points: pts(func(f vmFigures) float64 { return f.vmsPerS })},
			{Name: "VMIs bound/s (virt-controller's scheduler)", Points: pts(func(f vmFigures) float64 { return f.schedPerS })}}},
		"vm-controller.png": {Title: "converge-controller", X: x, Y: "MiB / CPU-ms", Series: []curve.Series{
			{Name: "peak RSS (MiB)", Points: pts(func(f vmFigures) float64 { return f.ctrlPeakRSS })},
			{Name: "CPU per VM (ms)", Points: pts(func(f vmFigures) float64 { return f.cpuMsPerVM })}}},
	})
}

// writePlots writes each plot to its file name in outDir.
func writePlots(b *testing.B, plots map[string]curve.Plot) {
	dir := outDir(b)
	for file, p := range plots {
		path := filepath.Join(dir, file)
		if err := p.WritePNG(path); err != nil {
			b.Fatal(err)
		}
		b.Logf("wrote %s", path)
	}
}
