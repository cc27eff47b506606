// Command volumewriter is the workload of the e2e volume tests: it writes
// $CONTENT to the file $FILE (in a mounted volume), then answers
// /healthz with "ok" on :8080, so the pod turns Ready only once the
// write succeeded; it exits 1 when the write fails. Built statically and
// packed as a one-layer image with internal/testing/cluster.BuildGoImage.
package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	file, content := os.Getenv("FILE"), os.Getenv("CONTENT")
	if file == "" {
		fmt.Fprintln(os.Stderr, "volumewriter: FILE not set")
		os.Exit(1)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "volumewriter:", err)
		os.Exit(1)
	}
	fmt.Println("volumewriter: wrote", file)
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fmt.Fprintln(os.Stderr, "volumewriter:", err)
		os.Exit(1)
	}
}
