package summary

import (
	"strings"
	"testing"
)

// sample is `make bench` output as go test prints it (lines of
// 2026-11-29), with the noise around result lines.
const sample = `goos: linux
BenchmarkApply/floor-patch16/first-2         	       3	 418339872 ns/op	       501.7 requests/op
BenchmarkApply/floor-patch16/first-2         	       3	 400000000 ns/op	       501.7 requests/op
BenchmarkApply/converge/first-2              	       3	 503144439 ns/op	       508.7 requests/op
BenchmarkApply/converge/first-2              	       3	 420000000 ns/op	       508.7 requests/op
BenchmarkApply/converge/noop-2               	       3	  21161885 ns/op	         5.000 requests/op
BenchmarkApply/ssa-ApplyAllStaged/noop-2     	       3	 654474129 ns/op	      1003 requests/op
BenchmarkRender/uncached-2                   	       3	  21351629 ns/op
BenchmarkRender/unchanged-2                  	       3	   3233458 ns/op
    sync_test.go:93: 15 runs: min 85.498622ms, median 91.490091ms, max 129.678577ms
BenchmarkCommitToApplied/direct-apply-2         	      15	 111349290 ns/op	        91.49 median-ms
BenchmarkCommitToApplied/webhook-2              	      15	 188109327 ns/op	        23.18 fetch-ms	       135.3 idle-RSS-MiB	       150.3 median-ms	       160.2 reconcile-ms	         1.000 reconciles/op	         0.5333 refreshes/op	       276.3 steady-RSS-MiB	        83.52 steady-RSS-file-MiB	       127.5 steady-heap-MiB	         1.642 x-floor
BenchmarkImport/qcow2-2       	       3	  89792520 ns/op	1494.75 MB/s	      1495 import-MB/s	      2037 qemu-img-MB/s	         0.7339 ratio
BenchmarkVMIToRunning-2   	     500	   1009941 ns/op	    609940 agent-ns/op	    393695 floor-ns/op	         1.549 x-floor
BenchmarkCreateThroughAPIServer/no-webhook-2         	    1000	    773157 ns/op	      1293 VMs/s
BenchmarkCreateThroughAPIServer/macpool-2            	    1000	   1443916 ns/op	       692.6 VMs/s	         0.5355 x-no-webhook	         0.7165 x-noop-webhook
BenchmarkFlux/converge-2         	      10	 183861078 ns/op	       153.7 commit-median-ms	        58.60 drift-median-ms	       132.6 idle-RSS-MiB	        52.93 noop-median-ms	         3.000 noop-requests	       279.0 steady-RSS-MiB
BenchmarkFlux/flux-2             	      10	1552202534 ns/op	      1550 commit-median-ms	      6451 drift-median-ms	       158.4 idle-RSS-MiB	       704.0 kubectl-noop-ms	        33.00 kubectl-noop-requests	      1451 noop-median-ms	       101.0 noop-requests	       217.1 steady-RSS-MiB
PASS
`

func TestRows(t *testing.T) {
	res := Results{}
	if err := Read(res, strings.NewReader(sample), "bench.txt"); err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, r := range Rows(res) {
		rows[r.What] = r
	}
	for _, tc := range []struct {
		what, converge, anchor, ratio, met string
	}{
		{"render of the example, warm", "21.4 ms", "cache hit 3.23 ms", "–", "yes"},
		// paired per run: 503/418 and 420/400
		{"first sync vs one SSA PATCH per object", "420–503 ms", "400–418 ms", "1.05–1.20×", "no"},
		{"no-op resync vs ssa ApplyAllStaged", "21.2 ms, 5.00 requests", "654 ms, 1003 requests", "0.03×", "yes"},
		{"commit → applied through the receiver vs in-process", "150 ms", "91.5 ms", "1.64×", "no"},
		{"reconciles per commit (status refreshes besides)", "1.00 (0.53)", "–", "–", "yes"},
		{"converge-controller RSS, steady (of it, the binary's mapped pages)", "276 MiB (83.5 MiB)", "Flux's two controllers 217 MiB", "–", "no"},
		{"qcow2 import vs qemu-img convert (throughput)", "1495 MB/s", "2037 MB/s", "0.73×", "no"},
		{"VMI → Running through the agent vs define + start", "610 µs", "394 µs", "1.55×", "no"},
		{"VM creations/s with the MAC pool webhook vs without", "693 VMs/s", "1293 VMs/s (no-op webhook –)", "0.54×", "no"},
		{"commit → applied, Flux vs converge", "154 ms", "Flux 1550 ms", "10.1×", "–"},
	} {
		r, ok := rows[tc.what]
		if !ok {
			t.Errorf("no row %q", tc.what)
			continue
		}
		got := []string{r.Converge, r.Anchor, r.Ratio.String("×"), r.Met}
		want := []string{tc.converge, tc.anchor, tc.ratio, tc.met}
		if strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Errorf("%s:\n got %q\nwant %q", tc.what, got, want)
		}
	}
	if s := Table(Rows(Results{})); strings.Count(s, "\n") != len(Rows(Results{}))+2 || !strings.Contains(s, "| – |") {
		t.Errorf("table of no results:\n%s", s)
	}
}

func TestReadSyntaxError(t *testing.T) {
	err := Read(Results{}, strings.NewReader("BenchmarkX-2 \t 3 \t 12 ns/op \t x-floor\n"), "bench.txt")
	if err == nil || !strings.Contains(err.Error(), "bench.txt:1") {
		t.Fatalf("Read of a broken result line: %v, want an error naming bench.txt:1", err)
	}
}
