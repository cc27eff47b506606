// Command echoserver is a tiny static HTTP server for the local cluster's
// tests and benchmarks. It listens on $PORT (default 8080) and answers
//
//   - /healthz: "ok" (a readiness probe target);
//   - /apiserver: the status of GET /api on the apiserver the way
//     client-go's in-cluster config reaches it (KUBERNETES_SERVICE_HOST
//     and _PORT, the service account's token and CA), e.g. "apiserver:
//     200 OK";
//   - anything else: "<$GREETING or hello> from <hostname>".
//
// Built statically and packed as a one-layer image with
// cluster.BuildGoImage.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	greeting := os.Getenv("GREETING")
	if greeting == "" {
		greeting = "hello"
	}
	host, _ := os.Hostname()
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	http.HandleFunc("/apiserver", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "apiserver:", apiserver()) })
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "%s from %s\n", greeting, host) })
	if err := http.ListenAndServe(":"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// apiserver does GET /api as rest.InClusterConfig would, and gives the
// response status or the error.
func apiserver() string {
	h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if h == "" || p == "" {
		return "KUBERNETES_SERVICE_HOST/PORT not set"
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err.Error()
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err.Error()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "no certificate in ca.crt"
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(h, p)+"/api", nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := c.Do(req)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	return resp.Status
}
