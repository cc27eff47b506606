// Command pause is the sandbox (pause) container of the local cluster: the
// first process of every pod, which holds the pod's namespaces. Like
// Kubernetes' build/pause/linux/pause.c it waits for SIGINT or SIGTERM,
// exits 0 then, and reaps the zombies of a shared process namespace
// (shareProcessNamespace pods make it PID 1). Built statically
// (CGO_ENABLED=0) and packed as cluster.PauseImage.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
