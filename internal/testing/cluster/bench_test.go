package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// BenchmarkStart measures how long the local cluster takes to come up,
// next to floors measured in the same run, one start per iteration:
//
//   - apiserver-floor: etcd and kube-apiserver alone, with the cluster's
//     own flags, certificates and node address, from launching etcd until
//     the apiserver's /readyz answers 200: the part of a start that no
//     kubelet, controller manager or containerd can shorten. Reported:
//     median-ms.
//   - envtest: etcd and kube-apiserver through internal/testing/controlplane
//     (envtest), the bare API server of the fast tests, for reference
//     (median-ms).
//   - node-ready: Start until the Node is Ready (median-ms, and x-floor,
//     its ratio to apiserver-floor's median); until the default
//     ServiceAccount exists, when pods are accepted and Start returns
//     (sa-median-ms, sa-x-floor); the apiserver's /readyz inside that start
//     (apiserver-median-ms); and Stop (stop-median-ms).
//
// It needs what StartForTest needs and skips otherwise.
func BenchmarkStart(b *testing.B) {
	bin, err := controlplane.BinDir()
	if err == nil {
		err = Check(bin)
	}
	if err != nil {
		b.Skipf("the local cluster cannot start here: %v", err)
	}
	var floor time.Duration
	b.Run("apiserver-floor", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			ds = append(ds, apiserverAlone(b, bin))
		}
		floor = reportMedian(b, ds)
	})
	b.Run("envtest", func(b *testing.B) {
		ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			env, err := controlplane.Start()
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			b.StopTimer()
			_ = env.Stop()
			b.StartTimer()
		}
		reportMedian(b, ds)
	})
	b.Run("node-ready", func(b *testing.B) {
		var ready, sa, api, stop []time.Duration
		for b.Loop() {
			o := DefaultOptions()
			o.BinDir = bin
			o.LockWait = testLockWait
			c, err := Start(context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			ready = append(ready, c.Timings.NodeReady)
			sa = append(sa, c.Timings.DefaultServiceAccount)
			api = append(api, c.Timings.APIServerReady)
			b.StopTimer()
			s := time.Now()
			if err := c.Stop(); err != nil {
				b.Fatal(err)
			}
			stop = append(stop, time.Since(s))
			b.StartTimer()
		}
		m := reportMedian(b, ready)
		msa := median(sa)
		b.ReportMetric(ms(msa), "sa-median-ms")
		b.ReportMetric(ms(median(api)), "apiserver-median-ms")
		b.ReportMetric(ms(median(stop)), "stop-median-ms")
		if floor > 0 {
			b.ReportMetric(float64(m)/float64(floor), "x-floor")
			b.ReportMetric(float64(msa)/float64(floor), "sa-x-floor")
		}
	})
}

// apiserverAlone starts etcd and kube-apiserver as Start does (holding
// the cluster lock, on the node address, with the cluster's flags and a
// fresh PKI), gives the time from launching etcd to /readyz answering, and
// stops both and removes what it made.
func apiserverAlone(b *testing.B, bin string) time.Duration {
	b.Helper()
	lock, err := acquireLock(testLockWait)
	if err != nil {
		b.Fatal(err)
	}
	defer lock.release()
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		b.Fatal(err)
	}
	p := newPKIFiles(filepath.Join(dir, "pki"))
	if err := writePKI(p, DefaultNodeName, "https://"+hostPort(APIServerPort)); err != nil {
		b.Fatal(err)
	}
	hadIP := nodeIPPresent()
	if err := addNodeIP(); err != nil {
		b.Fatal(err)
	}
	var procs []proc
	defer func() {
		if err := killProcs(procs, 10*time.Second); err != nil {
			b.Error(err)
		}
		if !hadIP {
			_ = removeNodeIP()
		}
	}()
	cfg := adminConfig(b, p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	etcd, err := launch("etcd", etcdArgs(bin, dir), nil, filepath.Join(dir, "logs", "etcd.log"), false)
	if err != nil {
		b.Fatal(err)
	}
	procs = append(procs, etcd.proc)
	if err := waitHTTP(ctx, etcd, "http://"+hostPort(EtcdPort)+"/health", nil); err != nil {
		b.Fatal(err)
	}
	etcdHealthy := time.Since(start)
	api, err := launch("kube-apiserver", apiserverArgs(bin, dir, p), nil, filepath.Join(dir, "logs", "kube-apiserver.log"), false)
	if err != nil {
		b.Fatal(err)
	}
	procs = append(procs, api.proc)
	if err := waitHTTP(ctx, api, "https://"+hostPort(APIServerPort)+"/readyz", cfg); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	b.Logf("etcd healthy %s, apiserver ready %s", etcdHealthy, d)
	return d
}

// adminConfig gives the rest.Config of the admin kubeconfig in p.
func adminConfig(b *testing.B, p pkiFiles) *rest.Config {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", p.adminConfig)
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// reportMedian reports the median of ds in milliseconds (median-ms) and
// logs the spread; it gives the median.
func reportMedian(b *testing.B, ds []time.Duration) time.Duration {
	m := median(ds)
	b.ReportMetric(ms(m), "median-ms")
	if len(ds) > 0 {
		s := slices.Clone(ds)
		slices.Sort(s)
		b.Logf("%d runs: min %s, median %s, max %s", len(s), s[0], m, s[len(s)-1])
	}
	return m
}

// median gives the median of ds.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
