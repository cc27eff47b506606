package e2e_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// apiStack is the node plane behind a real API server, as the VM tests of
// this package run it: a libvirtd started for the test, the hack/guest
// guest, a control plane with the graph's CRDs and a native KubeVirt, the
// real converge-controller (--webhook=false) and `converge-node vm
// --kubeconfig` registered as its Node.
type apiStack struct {
	l          *vmtest.Libvirt
	guest      string // hack/guest's output directory
	cp         *controlplane.Env
	c          client.Client
	dir        string // the test's directory: kubeconfig, state/
	kubeconfig string
	stateDir   string   // the agent's --state-dir
	bins       []string // ./cmd/converge-node, ./cmd/converge-controller, then extra
	ctl, agent *proc
	agentArgv  []string // the agent's command line, to start it again
}

// startAPIStack starts an apiStack whose agent registers nodeName, with
// domain (a leftover of an interrupted run) removed before and after;
// extra names more binaries to build (bins[2:]). before runs once the
// control plane has its CRDs and KubeVirt and before converge-controller
// starts (nil: nothing). It waits until the Node is registered.
func startAPIStack(t *testing.T, nodeName, domain string, before func(*controlplane.Env), extra ...string) *apiStack {
	t.Helper()
	s := &apiStack{l: vmtest.StartLibvirt(t)}
	bin, err := controlplane.BinDir()
	vmtest.Require(t, err == nil && controlplane.Available(bin), "kube-apiserver and etcd are not in bin/: run `make controlplane`")
	s.guest = vmtest.BuildGuest(t)
	s.bins = vmtest.BuildBinaries(t, append([]string{"./cmd/converge-node", "./cmd/converge-controller"}, extra...)...)
	s.l.RemoveDomain(t, domain)
	t.Cleanup(func() { s.l.RemoveDomain(t, domain) })

	s.cp, s.c, _ = controlplane.StartEnvForTest(t, kubevirtv1.AddToScheme) // stopped after the binaries (cleanups run last-in first-out)
	s.dir = t.TempDir()
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := s.cp.Kubeconfig(s.kubeconfig); err != nil {
		t.Fatal(err)
	}
	installCRDs(t, s.c)
	nativeKubeVirt(t, s.c)
	if before != nil {
		before(s.cp)
	}
	s.ctl = startProc(t, "converge-controller", s.bins[1], "--kubeconfig", s.kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--receiver-bind-address", "0",
		"--webhook=false", "--cache-dir", t.TempDir())
	s.stateDir = filepath.Join(s.dir, "state")
	s.agentArgv = []string{s.bins[0], "vm", "--kubeconfig", s.kubeconfig, "--node-name", nodeName,
		"--libvirt-uri", s.l.URI, "--domain-type", "qemu", "--state-dir", s.stateDir, "--resync", "5s", "--reserved-memory", "512Mi",
		"--console-bind-address", "127.0.0.1:0"}
	s.agent = startProc(t, "converge-node vm", s.agentArgv...)

	n := &corev1.Node{}
	waitFor(t, "the Node "+nodeName+" registered by the agent", 60*time.Second, func() bool {
		s.agent.running(t)
		return s.c.Get(context.Background(), types.NamespacedName{Name: nodeName}, n) == nil && n.Labels[v1alpha1.AgentLabel] == "true" &&
			n.Annotations[v1alpha1.AllocatableAnnotation] != ""
	})
	t.Logf("node %s: %s=%s", nodeName, v1alpha1.AllocatableAnnotation, n.Annotations[v1alpha1.AllocatableAnnotation])
	return s
}
