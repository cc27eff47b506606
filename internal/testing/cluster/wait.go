package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// pollInterval is how often Start checks a component it waits for.
const pollInterval = 50 * time.Millisecond

// waitHTTP polls url until it answers 200, failing early with r's log
// tail when r exits. With cfg, the request carries cfg's TLS client
// credentials and trusts its CA.
func waitHTTP(ctx context.Context, r *running, url string, cfg *rest.Config) error {
	client := &http.Client{Timeout: 2 * time.Second}
	if cfg != nil {
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			return err
		}
		client.Transport = rt
	}
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if done, werr := r.exited(); done {
			return fmt.Errorf("%s exited (%v) before %s answered; log %s:\n%s", r.Name, werr, url, r.log, tail(r.log, 3000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s did not answer 200 (last: %s): %w; log %s:\n%s", r.Name, url, last, ctx.Err(), r.log, tail(r.log, 3000))
		case <-time.After(pollInterval):
		}
	}
}

// waitNodeReady polls the Node until its Ready condition is True, failing
// early when a component exits.
func (c *Cluster) waitNodeReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	last := "not registered"
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		switch {
		case err == nil:
			last = "no Ready condition"
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					last = fmt.Sprintf("Ready=%s: %s: %s", cond.Status, cond.Reason, cond.Message)
				}
			}
		case !apierrors.IsNotFound(err):
			last = err.Error()
		}
		if err := c.processExited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready (%s): %w; kubelet log %s:\n%s", c.NodeName, last, ctx.Err(), c.LogPath("kubelet"), c.LogTail("kubelet", 3000))
		case <-time.After(pollInterval):
		}
	}
}

// waitDefaultServiceAccount polls until the default namespace's default
// ServiceAccount exists (the controller manager makes it; the apiserver
// rejects pods until then).
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if err := c.processExited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("default ServiceAccount missing: %w; kube-controller-manager log %s:\n%s", ctx.Err(), c.LogPath("kube-controller-manager"), c.LogTail("kube-controller-manager", 3000))
		case <-time.After(pollInterval):
		}
	}
}
