package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/receiver"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/internal/testing/safebuffer"
	"github.com/converge-dev/converge/operators/hco/hcowebhook"
	"github.com/converge-dev/converge/operators/network/macpool"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

var (
	syncKey = types.NamespacedName{Namespace: "converge", Name: "prod"}
	hcKey   = types.NamespacedName{Namespace: "kubevirt-hyperconverged", Name: "kubevirt-hyperconverged"}
	kvKey   = types.NamespacedName{Namespace: "kubevirt-hyperconverged", Name: "kubevirt-kubevirt-hyperconverged"}
)

// TestControllerBinary builds converge-controller and runs it as a
// process against a real API server, with every server it has on
// loopback ports: it reconciles a Sync of a real Git server to Ready,
// registers the hco-webhook (with the CA of the certificate it issued)
// that then refuses an invalid HyperConverged, serves v1beta1 through its
// /convert webhook, gives VirtualMachine NICs MACs from the
// NetworkAddonsConfig range through its MAC pool webhook, refuses a
// VirtualMachine with a field converge does not run, logs each webhook's
// registration, runs the native operators (the VM agent's and
// bridge-marker's DaemonSets from --node-image, the KubeVirt's status from
// their readiness, shown in the Sync's components), exposes the Sync's
// metrics on /metrics, applies a new
// commit when its receiver gets a signed push, and exits 0 on SIGTERM.
func TestControllerBinary(t *testing.T) {
	bin, err := controlplane.BinDir()
	if err != nil || !controlplane.Available(bin) {
		t.Skip("kube-apiserver and etcd are not in bin/: run `make controlplane`")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "converge-controller")
	start := time.Now()
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("go build: %s", time.Since(start).Round(time.Millisecond))

	env, err := controlplane.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.Kubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	engine, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := engine.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool { return c.List(ctx, &v1alpha1.SyncList{}) == nil })

	root := t.TempDir()
	repo := gitserver.NewRepo(t, root, "config", "main")
	repo.CopyDir(t, filepath.Join("..", "..", "testdata", "example"), ".")
	first := "main@sha1:" + repo.Commit(t, "example", nil)
	git := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{})

	ports := map[string]int{}
	for _, p := range []string{"metrics", "probe", "receiver", "webhook"} {
		ports[p] = controlplane.FreePort(t)
	}
	addr := func(p string) string { return fmt.Sprintf("127.0.0.1:%d", ports[p]) }
	var logs safebuffer.Buffer
	cmd := exec.Command(exe,
		"--kubeconfig", kubeconfig,
		"--metrics-bind-address", addr("metrics"),
		"--health-probe-bind-address", addr("probe"),
		"--receiver-bind-address", addr("receiver"),
		"--webhook-url", "https://"+addr("webhook"),
		"--webhook-port", fmt.Sprint(ports["webhook"]),
		"--cache-dir", t.TempDir(),
		"--node-image", "registry.local/converge/converge-node:test",
		"--operand-namespace", syncKey.Namespace,
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("converge-controller output (tail):\n%s", tail(logs.String(), 60))
		}
	})

	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncKey.Namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: syncKey.Namespace, Name: "hook"}, Data: map[string][]byte{"token": []byte("hook-token")}},
		&v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: syncKey.Namespace, Name: syncKey.Name},
			Spec: v1alpha1.SyncSpec{
				Source:   v1alpha1.GitSource{URL: git.RepoURL(repo), Ref: &v1alpha1.GitRef{Branch: "main"}},
				Interval: metav1.Duration{Duration: time.Hour},
				Receiver: &v1alpha1.Receiver{SecretRef: v1alpha1.LocalObjectReference{Name: "hook"}},
				// No kubelet runs the operands' roles on this bare API
				// server: the Sync is Ready once applied.
				Wait: new(bool),
			}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	d := waitReady(t, c, first, exited)
	t.Logf("Sync Ready at the first commit %s after creating it", d)

	// The hco-webhook is registered with the CA of the certificate the
	// controller issued, and serves: an HC it cannot render is refused.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	controlplane.Eventually(t, time.Minute, func() bool {
		if c.Get(ctx, client.ObjectKey{Name: hcowebhook.ConfigurationName}, vwc) != nil || len(vwc.Webhooks) == 0 {
			return false
		}
		for _, w := range vwc.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 || w.ClientConfig.URL == nil || !strings.HasPrefix(*w.ClientConfig.URL, "https://"+addr("webhook")+"/") {
				return false
			}
		}
		return true
	})
	bad := &unstructured.Unstructured{}
	bad.SetAPIVersion("hco.kubevirt.io/v1")
	bad.SetKind("HyperConverged")
	bad.SetNamespace(hcKey.Namespace)
	bad.SetName(hcKey.Name)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"security":{"certConfig":{"ca":{"duration":"5m"}}}}}`))
	err = c.Patch(ctx, bad, patch, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", hcowebhook.V1WebhookName)) ||
		!strings.Contains(err.Error(), "duration (5m) must be at least 10m") {
		t.Errorf("dry-run update of the HC with security.certConfig.ca.duration 5m: %v, want it denied by the hco-webhook", err)
	}
	// /convert: the HC reads as v1beta1 once the CRD has the caBundle.
	controlplane.Eventually(t, time.Minute, func() bool {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("hco.kubevirt.io/v1beta1")
		u.SetKind("HyperConverged")
		return c.Get(ctx, hcKey, u) == nil && u.GetAPIVersion() == "hco.kubevirt.io/v1beta1"
	})

	// The MAC pool: once the Sync installed the VirtualMachine CRD and the
	// NetworkAddonsConfig, a VM NIC without a MAC gets one from the
	// NetworkAddonsConfig's kubeMacPool range (the example HC's
	// kubeMacPoolConfiguration), and the same MAC given by a user to
	// another VM is refused.
	vmWithNIC := func(name, mac string) *unstructured.Unstructured {
		nic := map[string]any{"name": "default", "bridge": map[string]any{}}
		if mac != "" {
			nic["macAddress"] = mac
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
			"metadata": map[string]any{"namespace": syncKey.Namespace, "name": name},
			"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
				"domain":   map[string]any{"devices": map[string]any{"interfaces": []any{nic}}},
				"networks": []any{map[string]any{"name": "default", "pod": map[string]any{}}},
			}}},
		}}
	}
	nicMAC := func(vm *unstructured.Unstructured) string {
		nics, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "domain", "devices", "interfaces")
		if len(nics) == 0 {
			return ""
		}
		m, _ := nics[0].(map[string]any)["macAddress"].(string)
		return m
	}
	var vm1 *unstructured.Unstructured
	controlplane.Eventually(t, time.Minute, func() bool {
		vm1 = vmWithNIC("vm1", "")
		return c.Create(ctx, vm1, client.DryRunAll) == nil && nicMAC(vm1) != ""
	})
	vm1 = vmWithNIC("vm1", "")
	if err := c.Create(ctx, vm1); err != nil {
		t.Fatal(err)
	}
	if got := nicMAC(vm1); !strings.HasPrefix(got, "02:00:00:00:") {
		t.Errorf("VM NIC got MAC %q, want one in the NetworkAddonsConfig range 02:00:00:00:00:00–02:00:00:00:ff:ff", got)
	}
	err = c.Create(ctx, vmWithNIC("vm2", nicMAC(vm1)))
	if err == nil || !strings.Contains(err.Error(), "is already in use by VirtualMachine converge/vm1") {
		t.Errorf("a VM given vm1's MAC: %v, want it refused naming vm1", err)
	}
	// The VM validation webhook refuses a field converge does not run.
	gpuVM := vmWithNIC("gpu", "")
	_ = unstructured.SetNestedSlice(gpuVM.Object, []any{map[string]any{"name": "g", "deviceName": "nvidia.com/X"}}, "spec", "template", "spec", "domain", "devices", "gpus")
	controlplane.Eventually(t, time.Minute, func() bool {
		err := c.Create(ctx, gpuVM.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request: VirtualMachine converge/gpu: spec.template.spec.domain.devices.gpus: not supported by converge", vmadmission.VirtualMachineWebhookName))
	})
	// Each webhook logged its registration (the MAC pool's with its range).
	for _, want := range []struct{ logger, msg, key string }{
		{"admission", "the hco-webhook " + hcowebhook.ConfigurationName + " registered", ""},
		{"macpool", "the MAC pool webhook " + macpool.ConfigurationName + " registered", "range"},
		{"vm-validation", "the VM validation webhook " + vmadmission.ConfigurationName + " registered", ""},
	} {
		controlplane.Eventually(t, 10*time.Second, func() bool { return loggedBy(logs.String(), want.logger, want.msg, want.key) })
	}
	pool := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "converge-macpool"}, pool); err != nil {
		t.Errorf("the MAC pool's ConfigMap: %v", err)
	} else if s, e := pool.Annotations[macpool.RangeStartAnnotation], pool.Annotations[macpool.RangeEndAnnotation]; s != "02:00:00:00:00:00" || e != "02:00:00:00:ff:ff" {
		t.Errorf("the MAC pool's ConfigMap records the range %q–%q, want the NetworkAddonsConfig's", s, e)
	}

	// The native operators derived the roles of the KubeVirt and the
	// NetworkAddonsConfig the Sync applied (both in the HyperConverged's
	// namespace: the cluster-scoped NetworkAddonsConfig names it in
	// converge.dev/operand-namespace), running --node-image, and
	// report what runs: no DaemonSet controller runs on this bare API
	// server, so the KubeVirt is Progressing naming its DaemonSet, and
	// the Sync's status.components shows it.
	for _, ds := range []types.NamespacedName{{Namespace: kvKey.Namespace, Name: "converge-vm-agent"}, {Namespace: kvKey.Namespace, Name: "converge-bridge-marker"}} {
		d := &appsv1.DaemonSet{}
		if err := c.Get(ctx, ds, d); err != nil {
			t.Errorf("DaemonSet %s: %v", ds, err)
			continue
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.local/converge/converge-node:test" {
			t.Errorf("DaemonSet %s runs %s, want --node-image", ds, img)
		}
	}
	kvStatus := &unstructured.Unstructured{}
	kvStatus.SetAPIVersion("kubevirt.io/v1")
	kvStatus.SetKind("KubeVirt")
	controlplane.Eventually(t, time.Minute, func() bool {
		if c.Get(ctx, kvKey, kvStatus) != nil {
			return false
		}
		st, _, _ := unstructured.NestedMap(kvStatus.Object, "status")
		conds, _ := st["conditions"].([]any)
		for _, x := range conds {
			m := x.(map[string]any)
			if m["type"] == "Progressing" && m["status"] == "True" && strings.Contains(fmt.Sprint(m["message"]), "DaemonSet kubevirt-hyperconverged/converge-vm-agent") {
				return st["phase"] == "Deploying" && st["operatorVersion"] == "dev" && st["targetKubeVirtRegistry"] == "registry.local/converge"
			}
		}
		return false
	})
	controlplane.Eventually(t, time.Minute, func() bool {
		s := &v1alpha1.Sync{}
		if c.Get(ctx, syncKey, s) != nil {
			return false
		}
		for _, comp := range s.Status.Components {
			if comp.Name == "virt" && comp.Health == "Progressing" && strings.Contains(comp.Message, "converge-vm-agent") {
				return true
			}
		}
		return false
	})

	// /metrics serves the Sync's series.
	metrics := httpGet(t, "http://"+addr("metrics")+"/metrics")
	for _, want := range []string{
		`(?m)^converge_reconcile_duration_seconds_count\{name="prod",namespace="converge",result="success"\} [1-9]`,
		`(?m)^converge_last_applied_revision_info\{name="prod",namespace="converge",revision="` + regexp.QuoteMeta(first) + `"\} 1$`,
	} {
		if !regexp.MustCompile(want).MatchString(metrics) {
			t.Errorf("/metrics has no line matching %s:\n%s", want, grep(metrics, "^converge_(reconcile_duration_seconds_count|last_applied)"))
		}
	}
	if body := httpGet(t, "http://"+addr("probe")+"/readyz"); body != "ok" {
		t.Errorf("/readyz = %q, want ok", body)
	}

	// A signed push to the receiver applies a new commit (interval 1h);
	// the HC update passes the hco-webhook (failurePolicy Fail).
	sha := repo.Replace(t, "six migrations", "hyperconverged.yaml", "parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 6")
	next := "main@sha1:" + sha
	// The hook's path is the Sync's status.webhookPath, a digest of the
	// token; the former /hook/<namespace>/<name> is an unknown path.
	hooked := &v1alpha1.Sync{}
	if err := c.Get(ctx, syncKey, hooked); err != nil {
		t.Fatal(err)
	}
	if want := receiver.Path(syncKey, []byte("hook-token")); hooked.Status.WebhookPath != want {
		t.Fatalf("status.webhookPath = %q, want %q", hooked.Status.WebhookPath, want)
	}
	resp, err := http.DefaultClient.Do(gitserver.GitHubPush(t, "http://"+addr("receiver")+"/hook/"+syncKey.Namespace+"/"+syncKey.Name, "hook-token", "main", sha))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the former path /hook/<namespace>/<name> answered %s, want 404", resp.Status)
	}
	req := gitserver.GitHubPush(t, "http://"+addr("receiver")+hooked.Status.WebhookPath, "hook-token", "main", sha)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("receiver answered %s", resp.Status)
	}
	d = waitReady(t, c, next, exited)
	t.Logf("pushed commit applied %s after the webhook", d)
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	if err := c.Get(ctx, kvKey, kv); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedInt64(kv.Object, "spec", "configuration", "migrations", "parallelMigrationsPerCluster"); v != 6 {
		t.Errorf("KubeVirt parallelMigrationsPerCluster = %d, want 6", v)
	}
	// The structured log names the revision and each changed object.
	wantChange := "KubeVirt/" + kvKey.Namespace + "/" + kvKey.Name + " configured"
	controlplane.Eventually(t, 10*time.Second, func() bool { return reconciledLog(logs.String(), next, wantChange) })

	// SIGTERM: a clean exit.
	start = time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		t.Logf("exited %s after SIGTERM: %v", time.Since(start).Round(time.Millisecond), err)
		if err != nil {
			t.Errorf("converge-controller exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("converge-controller still running 30s after SIGTERM")
	}
}

// waitReady polls the Sync until it is Ready at revision, failing early
// when the process exits.
func waitReady(t *testing.T, c client.Client, revision string, exited <-chan error) time.Duration {
	t.Helper()
	start := time.Now()
	s := &v1alpha1.Sync{}
	for time.Since(start) < 3*time.Minute {
		select {
		case err := <-exited:
			t.Fatalf("converge-controller exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if c.Get(context.Background(), syncKey, s) == nil && s.Status.LastAppliedRevision == revision &&
			s.Status.ObservedGeneration == s.Generation && apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition) {
			return time.Since(start)
		}
	}
	b, _ := json.MarshalIndent(s.Status.Conditions, "", "  ")
	t.Fatalf("Sync %s not Ready at %s within 3m; lastApplied %q, conditions:\n%s", syncKey, revision, s.Status.LastAppliedRevision, b)
	return 0
}

// reconciledLog reports whether logs (JSON lines) hold a "reconciled"
// line of the Sync at revision whose changes include change.
func reconciledLog(logs, revision, change string) bool {
	for l := range strings.Lines(logs) {
		var line struct {
			Msg      string   `json:"msg"`
			Name     string   `json:"name"`
			Revision string   `json:"revision"`
			Changes  []string `json:"changes"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "reconciled" && line.Name == syncKey.Name &&
			line.Revision == revision && slices.Contains(line.Changes, change) {
			return true
		}
	}
	return false
}

// loggedBy reports whether logs (JSON lines) hold a line of logger with
// msg (and key, when not empty).
func loggedBy(logs, logger, msg, key string) bool {
	for l := range strings.Lines(logs) {
		line := map[string]any{}
		if json.Unmarshal([]byte(l), &line) == nil && line["logger"] == logger && line["msg"] == msg && (key == "" || line[key] != nil) {
			return true
		}
	}
	return false
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}

func grep(s, pattern string) string {
	re := regexp.MustCompile(pattern)
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
