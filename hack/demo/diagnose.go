package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// diagnose prints, after a step failed, what a user would look at next:
// the Syncs, their Events and the tail of converge-controller's log (at
// most 20 seconds; its own errors are printed, not returned).
func (d *demo) diagnose() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	say("the demo failed; what the cluster says")
	_ = d.show(ctx, "get", "syncs", "-A")
	_ = d.show(ctx, "events", "-A")
	pods := &corev1.PodList{}
	if err := d.env.Client.List(ctx, pods, client.InNamespace(syncNS), client.MatchingLabels{"app.kubernetes.io/name": "converge-controller"}); err != nil {
		note("listing converge-controller's pods: %v", err)
		return
	}
	tail := int64(40)
	for _, p := range pods.Items {
		b, err := d.env.Clientset.CoreV1().Pods(syncNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "manager", TailLines: &tail}).DoRaw(ctx)
		if err != nil {
			note("log of %s/%s: %v", syncNS, p.Name, err)
			continue
		}
		note("last %d lines of %s/%s (container manager), %s:", tail, syncNS, p.Name, podState(&p))
		fmt.Print(string(b))
	}
}
