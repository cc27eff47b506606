package measure

import (
	"os"
	"strings"
	"testing"
)

func TestRequests(t *testing.T) {
	const header = "# HELP apiserver_request_total Counter of apiserver requests.\n# TYPE apiserver_request_total counter\n"
	for _, tc := range []struct {
		name, text string
		want       float64
		err        string
	}{
		{"sums every series", header +
			`apiserver_request_total{code="200",resource="configmaps",verb="GET"} 3` + "\n" +
			`apiserver_request_total{code="201",resource="configmaps",verb="APPLY"} 4.5` + "\n", 7.5, ""},
		{"leaves the background out", header +
			`apiserver_request_total{code="200",resource="configmaps",verb="GET"} 3` + "\n" +
			`apiserver_request_total{code="200",resource="leases",verb="PUT"} 100` + "\n" +
			`apiserver_request_total{code="200",resource="endpoints",verb="GET"} 10` + "\n" +
			`apiserver_request_total{code="200",resource="endpointslices",verb="LIST"} 10` + "\n", 3, ""},
		{"non-resource requests count", header +
			`apiserver_request_total{code="200",resource="",verb="GET"} 2` + "\n", 2, ""},
		{"other families are ignored", header +
			`apiserver_request_total{resource="pods"} 1` + "\n" +
			"# TYPE etcd_requests_total counter\netcd_requests_total 50\n", 1, ""},
		{"missing family", "# TYPE etcd_requests_total counter\netcd_requests_total 50\n", 0, "no apiserver_request_total"},
		{"not a counter", "# TYPE apiserver_request_total gauge\napiserver_request_total 1\n", 0, "want a counter"},
		{"garbage", "apiserver_request_total{ 1\n", 0, "parsing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Requests(strings.NewReader(tc.text))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Requests = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Requests = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRSSParts(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         RSS
		err          string
	}{
		{"both", "VmRSS:\t 3072 kB\nRssAnon:\t 1024 kB\nRssFile:\t 2048 kB\nRssShmem:\t0 kB\n", RSS{Anon: 1, File: 2}, ""},
		{"no file line", "RssAnon:\t1024 kB\n", RSS{}, "no RssFile"},
		{"no anon line", "RssFile:\t1024 kB\n", RSS{}, "no RssAnon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RSSParts(tc.status)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("RSSParts = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("RSSParts = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestVmRSS(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         float64
		err          string
	}{
		{"kB to MiB", "Name:\tgo\nVmPeak:\t 9999 kB\nVmRSS:\t   2048 kB\nRssAnon:\t 1024 kB\n", 2, ""},
		{"fraction", "VmRSS:\t512 kB\n", 0.5, ""},
		{"no line", "Name:\tkthreadd\nState:\tS (sleeping)\n", 0, "no VmRSS"},
		{"other unit", "VmRSS:\t2 MB\n", 0, "want"},
		{"not a number", "VmRSS:\tmany kB\n", 0, "invalid syntax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VmRSS(tc.status)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("VmRSS = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("VmRSS = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRSSMiBOfThisProcess(t *testing.T) {
	mib, err := RSSMiB(os.Getpid())
	if err != nil || mib <= 0 {
		t.Fatalf("RSSMiB(self) = %v, %v; want a positive size", mib, err)
	}
	if _, err := RSSMiB(-1); err == nil {
		t.Fatal("RSSMiB(-1) succeeded")
	}
}
