package importer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const mib = 1 << 20

// requireTool fails (CONVERGE_REQUIRE_NODEPLANE=1, as CI sets) or skips
// when a qemu-utils binary is missing.
func requireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			tb.Fatalf("%s not found (apt-get install qemu-utils): %v", name, err)
		}
		tb.Skipf("%s not found (apt-get install qemu-utils): %v", name, err)
	}
	return p
}

func run(tb testing.TB, name string, args ...string) {
	tb.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// fixtures are the images served by the test server, made with qemu-img.
type fixtures struct {
	dir       string
	raw       []byte // 4 MiB: 1 MiB 0xab, 1 MiB zeros, 1 MiB random, 1 MiB zeros
	qcow2     []byte // raw converted to qcow2
	qioQcow2  []byte // 8 MiB qcow2 from qemu-img create + qemu-io write -P 0xcd 1M 1M
	qioRaw    []byte // what qioQcow2 holds
	backing   []byte // qcow2 with a backing file
	truncated []byte // qcow2 magic with an unknown version
}

func makeFixtures(tb testing.TB) *fixtures {
	tb.Helper()
	requireTool(tb, "qemu-img")
	requireTool(tb, "qemu-io")
	f := &fixtures{dir: tb.TempDir()}
	f.raw = make([]byte, 4*mib)
	for i := range mib {
		f.raw[i] = 0xab
	}
	rand.New(rand.NewSource(7)).Read(f.raw[2*mib : 3*mib])
	p := func(n string) string { return filepath.Join(f.dir, n) }
	if err := os.WriteFile(p("src.raw"), f.raw, 0o644); err != nil {
		tb.Fatal(err)
	}
	run(tb, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", p("src.raw"), p("src.qcow2"))
	run(tb, "qemu-img", "create", "-q", "-f", "qcow2", p("qio.qcow2"), "8M")
	run(tb, "qemu-io", "-f", "qcow2", "-c", "write -P 0xcd 1M 1M", p("qio.qcow2"))
	f.qioRaw = make([]byte, 8*mib)
	for i := mib; i < 2*mib; i++ {
		f.qioRaw[i] = 0xcd
	}
	run(tb, "qemu-img", "create", "-q", "-f", "qcow2", "-b", p("src.qcow2"), "-F", "qcow2", p("overlay.qcow2"))
	read := func(n string) []byte {
		b, err := os.ReadFile(p(n))
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	f.qcow2, f.qioQcow2, f.backing = read("src.qcow2"), read("qio.qcow2"), read("overlay.qcow2")
	f.truncated = append([]byte{}, f.qcow2[:64*1024]...)
	copy(f.truncated[4:8], []byte{0, 0, 0, 99}) // qcow2 version 99
	return f
}

// newMux serves the fixtures; flaky fails its first request with 503; hang
// sends 1 MiB of a 4 MiB body then stalls until the client goes away.
func newMux(f *fixtures) (*http.ServeMux, *atomic.Int32) {
	var flakyHits atomic.Int32
	mux := http.NewServeMux()
	serve := func(path string, body []byte) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, path, time.Time{}, bytes.NewReader(body))
		})
	}
	serve("/raw.img", f.raw)
	serve("/disk.qcow2", f.qcow2)
	serve("/qio.qcow2", f.qioQcow2)
	serve("/overlay.qcow2", f.backing)
	serve("/truncated.qcow2", f.truncated)
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream") // lie: the sniffing must catch it
		fmt.Fprint(w, "<!DOCTYPE html><html><body>Please log in</body></html>")
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte{0xee}, mib) // no Content-Length: chunked
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/flaky.img", func(w http.ResponseWriter, r *http.Request) {
		if flakyHits.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		http.ServeContent(w, r, "flaky.img", time.Time{}, bytes.NewReader(f.raw))
	})
	mux.HandleFunc("/hang.img", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(4*mib))
		w.Write(f.raw[:mib])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	return mux, &flakyHits
}

// selfSigned gives a PEM certificate unrelated to httptest's.
func selfSigned(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, DNSNames: []string{"example.com"}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func padded(b []byte, n int) []byte { return append(append([]byte{}, b...), make([]byte, n-len(b))...) }

func TestImport(t *testing.T) {
	f := makeFixtures(t)
	mux, flaky := newMux(f)
	plain := httptest.NewServer(mux)
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewTLSServer(mux)
	t.Cleanup(tlsSrv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	wrongCA := selfSigned(t)

	cases := []struct {
		name     string
		src      Source
		size     int64
		opts     func(*Options)
		want     []byte // expected content of the target
		format   string
		reason   Reason
		retry    bool
		attempts int
	}{
		{name: "raw", src: Source{URL: plain.URL + "/raw.img"}, size: 6 * mib, want: padded(f.raw, 6*mib), format: "raw"},
		{name: "raw no resize", src: Source{URL: plain.URL + "/raw.img"}, size: 6 * mib, opts: func(o *Options) { o.Resize = false }, want: f.raw, format: "raw"},
		{name: "qcow2 over https with CA", src: Source{URL: tlsSrv.URL + "/disk.qcow2", CA: ca}, size: 4 * mib, want: f.raw, format: "qcow2"},
		{name: "qcow2 written by qemu-io", src: Source{URL: plain.URL + "/qio.qcow2"}, size: 8 * mib, want: f.qioRaw, format: "qcow2"},
		{name: "raw checksum good", src: Source{URL: plain.URL + "/raw.img", Checksum: "sha256:" + sha(f.raw)}, size: 4 * mib, want: f.raw, format: "raw"},
		{name: "qcow2 checksum good", src: Source{URL: plain.URL + "/disk.qcow2", Checksum: "sha256:" + strings.ToUpper(sha(f.qcow2))}, size: 4 * mib, want: f.raw, format: "qcow2"},
		{name: "retry after 503", src: Source{URL: plain.URL + "/flaky.img"}, size: 4 * mib, want: f.raw, format: "raw", attempts: 2},
		{name: "checksum bad", src: Source{URL: plain.URL + "/disk.qcow2", Checksum: "sha256:" + sha(f.raw)}, size: 4 * mib, reason: ReasonChecksumMismatch},
		{name: "checksum malformed", src: Source{URL: plain.URL + "/raw.img", Checksum: "sha256:abc"}, size: 4 * mib, reason: ReasonInvalidInput},
		{name: "404", src: Source{URL: plain.URL + "/nope.img"}, size: 4 * mib, reason: ReasonNotFound},
		{name: "html page", src: Source{URL: plain.URL + "/page"}, size: 4 * mib, reason: ReasonNotAnImage},
		{name: "corrupt qcow2", src: Source{URL: plain.URL + "/truncated.qcow2"}, size: 4 * mib, reason: ReasonNotAnImage},
		{name: "backing file", src: Source{URL: plain.URL + "/overlay.qcow2"}, size: 4 * mib, reason: ReasonNotAnImage},
		{name: "qcow2 too big", src: Source{URL: plain.URL + "/qio.qcow2"}, size: 4 * mib, reason: ReasonTooBig},
		{name: "raw too big", src: Source{URL: plain.URL + "/raw.img"}, size: 4*mib - 1, reason: ReasonTooBig},
		{name: "endless body", src: Source{URL: plain.URL + "/endless"}, size: 1 * mib, reason: ReasonTooBig},
		{name: "wrong CA", src: Source{URL: tlsSrv.URL + "/disk.qcow2", CA: wrongCA}, size: 4 * mib, reason: ReasonUnreachable},
		{name: "connection refused", src: Source{URL: "http://127.0.0.1:1/raw.img"}, size: 4 * mib, reason: ReasonUnreachable, retry: true},
		{name: "server hangs", src: Source{URL: plain.URL + "/hang.img"}, size: 4 * mib, opts: func(o *Options) { o.Timeout = 300 * time.Millisecond }, reason: ReasonTimeout, retry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "disk.img")
			const old = "previous content"
			if err := os.WriteFile(target, []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var reports []Progress
			o := DefaultOptions()
			o.Retries, o.Backoff = 1, 10*time.Millisecond
			o.ProgressInterval = 0
			o.Progress = func(p Progress) { mu.Lock(); reports = append(reports, p); mu.Unlock() }
			if tc.opts != nil {
				tc.opts(&o)
			}
			flaky.Store(0)
			start := time.Now()
			res, err := Import(context.Background(), tc.src, Target{Path: target, SizeBytes: tc.size}, o)
			t.Logf("%s in %v: %+v err=%v", tc.name, time.Since(start), res, err)

			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 || entries[0].Name() != "disk.img" {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("directory holds %v, expected only disk.img (temporary files left behind?)", names)
			}
			got, rerr := os.ReadFile(target)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if tc.reason != "" {
				if ReasonOf(err) != tc.reason {
					t.Fatalf("error %v: reason %q, expected %q", err, ReasonOf(err), tc.reason)
				}
				if IsRetryable(err) != tc.retry {
					t.Errorf("retryable %v, expected %v", IsRetryable(err), tc.retry)
				}
				if !strings.Contains(err.Error(), tc.src.URL) {
					t.Errorf("error %q does not name the URL", err)
				}
				if string(got) != old {
					t.Errorf("target changed on failure: %d bytes", len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if res.Format != tc.format {
				t.Errorf("format %q, expected %q", res.Format, tc.format)
			}
			if tc.attempts > 0 && res.Attempts != tc.attempts {
				t.Errorf("attempts %d, expected %d", res.Attempts, tc.attempts)
			}
			if sha(got) != sha(tc.want) || len(got) != len(tc.want) {
				t.Fatalf("target: %d bytes sha256 %s, expected %d bytes sha256 %s", len(got), sha(got), len(tc.want), sha(tc.want))
			}
			var st syscall.Stat_t
			if err := syscall.Stat(target, &st); err != nil {
				t.Fatal(err)
			}
			nonzero := int64(0)
			for i := 0; i < len(tc.want); i += sparseBlock {
				if !bytes.Equal(tc.want[i:min(i+sparseBlock, len(tc.want))], zeroBlock[:min(sparseBlock, len(tc.want)-i)]) {
					nonzero += sparseBlock
				}
			}
			t.Logf("allocated %d bytes of %d apparent, %d non-zero", st.Blocks*512, st.Size, nonzero)
			if st.Blocks*512 >= st.Size || st.Blocks*512 > nonzero+64*1024 {
				t.Errorf("not sparse: %d bytes allocated for %d bytes with %d non-zero", st.Blocks*512, st.Size, nonzero)
			}
			mu.Lock()
			defer mu.Unlock()
			checkProgress(t, reports, tc.format != "raw")
		})
	}
}

// checkProgress: percentages never decrease, end at exactly 100 once, and
// for a conversion include a value in (50, 100) from qemu-img -p.
func checkProgress(t *testing.T, reports []Progress, converted bool) {
	t.Helper()
	if len(reports) == 0 {
		t.Fatal("no progress reported")
	}
	hundreds, mid := 0, false
	for i, p := range reports {
		if i > 0 && p.Percent < reports[i-1].Percent {
			t.Errorf("progress went back from %s to %s", reports[i-1], p)
		}
		if p.Percent == 100 {
			hundreds++
		}
		if p.Percent >= 50 && p.Percent < 100 {
			mid = true
		}
	}
	if last := reports[len(reports)-1]; last.Percent != 100 || last.String() != "100.00%" || hundreds != 1 {
		t.Errorf("last progress %s, 100%% reported %d times; expected one final 100.00%%", last, hundreds)
	}
	if converted && !mid {
		t.Errorf("no conversion progress between 50%% and 100%% in %v", reports)
	}
}

func TestImportCanceled(t *testing.T) {
	f := makeFixtures(t)
	mux, _ := newMux(f)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Import(ctx, Source{URL: srv.URL + "/hang.img"}, Target{Path: filepath.Join(dir, "disk.img"), SizeBytes: 4 * mib}, DefaultOptions())
	if ReasonOf(err) != ReasonCanceled || IsRetryable(err) {
		t.Fatalf("error %v: expected a non-retryable %s", err, ReasonCanceled)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files left in the target directory, expected none", len(entries))
	}
}

func TestParseProgress(t *testing.T) {
	var got []float64
	parseProgress(strings.NewReader("    (0.00/100%)\r    (12.50/100%)\r    (100.00/100%)\r\n"), func(p float64) { got = append(got, p) })
	if fmt.Sprint(got) != "[0 12.5 100]" {
		t.Fatalf("parsed %v, expected [0 12.5 100]", got)
	}
}

func TestSparseWriter(t *testing.T) {
	for _, chunk := range []int{1, 1000, 4096, 5000, 1 << 20} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			data := make([]byte, 64*1024+123)
			copy(data[4096+17:], "hello")
			data[len(data)-1] = 1
			fh, err := os.Create(filepath.Join(t.TempDir(), "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			w := &sparseWriter{f: fh}
			for i := 0; i < len(data); i += chunk {
				if _, err := w.Write(data[i:min(i+chunk, len(data))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.finish(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(fh.Name())
			if !bytes.Equal(got, data) {
				t.Fatalf("content differs (%d bytes read, %d expected)", len(got), len(data))
			}
		})
	}
}
