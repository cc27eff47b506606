package summary

import "math"

// The benchmarks `make bench` runs, by the names Rows reads.
const (
	render    = "BenchmarkRender/"
	apply     = "BenchmarkApply/"
	commit    = "BenchmarkCommitToApplied/"
	flux      = "BenchmarkFlux/"
	importer  = "BenchmarkImport/qcow2"
	vmi       = "BenchmarkVMIToRunning"
	macpool   = "BenchmarkCreateThroughAPIServer/"
	nsToMilli = 1e-6
)

// Rows gives issue 18's table from res: the warm render against its
// goal of 50 ms (the cache hit as the floor); the first sync and the
// no-op resync against one SSA PATCH per object and fluxcd/pkg/ssa's
// ApplyAllStaged; commit → applied through the receiver against the
// in-process apply, with reconciles per commit; converge-controller's
// steady RSS (Flux's controllers as the anchor); the qcow2 import against
// qemu-img convert; VMI → Running through the agent against define and
// start; VM creations with the MAC pool webhook against none; and Flux
// against converge for a commit, a no-op and a drift. A figure not in
// res prints "–".
func Rows(res Results) []Row {
	inf := math.Inf(1)
	ms := func(name string) Range { return res.Get(name, "ns/op", nsToMilli) }
	var rows []Row

	warm := ms(render + "uncached")
	rows = append(rows, Row{What: "render of the example, warm",
		Converge: warm.String("ms"), Anchor: "cache hit " + ms(render+"unchanged").String("ms"),
		Ratio: None, Goal: "≤ 50 ms", Met: met(warm, 0, 50)})

	first := res.ratio(apply+"converge/first", "ns/op", apply+"floor-patch16/first", "ns/op")
	rows = append(rows, Row{What: "first sync vs one SSA PATCH per object",
		Converge: ms(apply + "converge/first").String("ms"), Anchor: ms(apply + "floor-patch16/first").String("ms"),
		Ratio: first, Goal: "≤ 1.1×", Met: met(first, 0, 1.1)})

	noop := res.ratio(apply+"converge/noop", "ns/op", apply+"ssa-ApplyAllStaged/noop", "ns/op")
	rows = append(rows, Row{What: "no-op resync vs ssa ApplyAllStaged",
		Converge: ms(apply+"converge/noop").String("ms") + ", " + res.Get(apply+"converge/noop", "requests/op", 1).String("requests"),
		Anchor:   ms(apply+"ssa-ApplyAllStaged/noop").String("ms") + ", " + res.Get(apply+"ssa-ApplyAllStaged/noop", "requests/op", 1).String("requests"),
		Ratio:    noop, Goal: "keep (< 1×)", Met: met(noop, 0, 1)})

	x := res.Get(commit+"webhook", "x-floor", 1)
	rows = append(rows, Row{What: "commit → applied through the receiver vs in-process",
		Converge: res.Get(commit+"webhook", "median-ms", 1).String("ms"), Anchor: res.Get(commit+"direct-apply", "median-ms", 1).String("ms"),
		Ratio: x, Goal: "≤ 1.2×", Met: met(x, 0, 1.2)})

	rec := res.Get(commit+"webhook", "reconciles/op", 1)
	rows = append(rows, Row{What: "reconciles per commit (status refreshes besides)",
		Converge: rec.String("") + " (" + res.Get(commit+"webhook", "refreshes/op", 1).String("") + ")", Anchor: "–",
		Ratio: None, Goal: "1.00", Met: met(rec, 1, 1)})

	rss := res.Get(commit+"webhook", "steady-RSS-MiB", 1)
	rows = append(rows, Row{What: "converge-controller RSS, steady (of it, the binary's mapped pages)",
		Converge: rss.String("MiB") + " (" + res.Get(commit+"webhook", "steady-RSS-file-MiB", 1).String("MiB") + ")",
		Anchor:   "Flux's two controllers " + res.Get(flux+"flux", "steady-RSS-MiB", 1).String("MiB"),
		Ratio:    None, Goal: "≤ 100 MiB", Met: met(rss, 0, 100)})

	q := res.Get(importer, "ratio", 1)
	rows = append(rows, Row{What: "qcow2 import vs qemu-img convert (throughput)",
		Converge: res.Get(importer, "import-MB/s", 1).String("MB/s"), Anchor: res.Get(importer, "qemu-img-MB/s", 1).String("MB/s"),
		Ratio: q, Goal: "≥ 0.8×", Met: met(q, 0.8, inf)})

	v := res.Get(vmi, "x-floor", 1)
	rows = append(rows, Row{What: "VMI → Running through the agent vs define + start",
		Converge: res.Get(vmi, "agent-ns/op", 1e-3).String("µs"), Anchor: res.Get(vmi, "floor-ns/op", 1e-3).String("µs"),
		Ratio: v, Goal: "≤ 1.2×", Met: met(v, 0, 1.2)})

	m := res.Get(macpool+"macpool", "x-no-webhook", 1)
	rows = append(rows, Row{What: "VM creations/s with the MAC pool webhook vs without",
		Converge: res.Get(macpool+"macpool", "VMs/s", 1).String("VMs/s"),
		Anchor:   res.Get(macpool+"no-webhook", "VMs/s", 1).String("VMs/s") + " (no-op webhook " + res.Get(macpool+"noop-webhook", "VMs/s", 1).String("VMs/s") + ")",
		Ratio:    m, Goal: "≥ 0.8×", Met: met(m, 0.8, inf)})

	for _, f := range []struct{ what, unit string }{
		{"commit → applied, Flux vs converge", "commit-median-ms"},
		{"no-op reconcile, Flux vs converge", "noop-median-ms"},
		{"drift reverted, Flux (interval 10 s) vs converge (watch)", "drift-median-ms"},
	} {
		rows = append(rows, Row{What: f.what,
			Converge: res.Get(flux+"converge", f.unit, 1).String("ms"), Anchor: "Flux " + res.Get(flux+"flux", f.unit, 1).String("ms"),
			Ratio: res.ratio(flux+"flux", f.unit, flux+"converge", f.unit), Goal: "side by side", Met: "–"})
	}
	return rows
}
