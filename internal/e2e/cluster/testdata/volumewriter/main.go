// Command volumewriter is the workload of the e2e volume tests: it writes
// $CONTENT to the file $FILE (in a mounted volume), then answers
// /healthz with "ok" on :8080, so the pod turns Ready only once the
// write succeeded; it exits 1 when the write fails. With $DEVICE (a block
// volume's device in the container), it writes $CONTENT at the device's
// start instead ($FILE is then optional) and, until it is stopped, prints
// the line "volumewriter: size <device> <bytes>" at start and whenever the
// device's size changes (read every 250 ms by seeking to its end), so a
// test sees a volume expansion reach the pod in its log. With $EXPECT_FILE
// it first reads that file and exits 1 unless it holds $EXPECT, so a pod
// turns Ready only once it read what a restored volume must hold. Built statically
// and packed as a one-layer image with internal/testing/cluster.BuildGoImage.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	file, device, content := os.Getenv("FILE"), os.Getenv("DEVICE"), os.Getenv("CONTENT")
	if path := os.Getenv("EXPECT_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			fail(err.Error())
		}
		if string(b) != os.Getenv("EXPECT") {
			fail(fmt.Sprintf("%s holds %q, want %q", path, b, os.Getenv("EXPECT")))
		}
		fmt.Println("volumewriter: read", path)
	}
	if file == "" && device == "" {
		fail("neither FILE nor DEVICE set")
	}
	if file != "" {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			fail(err.Error())
		}
		fmt.Println("volumewriter: wrote", file)
	}
	if device != "" {
		f, err := os.OpenFile(device, os.O_RDWR, 0)
		if err != nil {
			fail(err.Error())
		}
		if _, err := f.WriteAt([]byte(content), 0); err != nil {
			fail(err.Error())
		}
		if err := f.Sync(); err != nil {
			fail(err.Error())
		}
		fmt.Println("volumewriter: wrote", device)
		go watchSize(f, device)
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fail(err.Error())
	}
}

// watchSize prints the size of the device f (named name) at once and on
// every change.
func watchSize(f *os.File, name string) {
	last := int64(-1)
	for {
		n, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			fail(err.Error())
		}
		if n != last {
			fmt.Println("volumewriter: size", name, n)
			last = n
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "volumewriter:", msg)
	os.Exit(1)
}
