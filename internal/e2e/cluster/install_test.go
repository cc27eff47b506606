package cluster_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/e2e/cluster"
	"github.com/converge-dev/converge/internal/images"
)

// The bundle `converge install` applies (components/controller).
const (
	controllerNS   = "converge-system"
	controllerName = "converge-controller"
	controllerSel  = "app.kubernetes.io/name=" + controllerName
	receiverPort   = 9292
	hcoWebhookName = "converge-hyperconverged-validator"
)

// bundleLines are the lines the first `converge install` prints, one per
// object of the bundle in apply order.
var bundleLines = []string{
	"CustomResourceDefinition/syncs.converge.dev",
	"Namespace/converge-system",
	"ClusterRole/converge-controller",
	"ClusterRoleBinding/converge-controller",
	"ServiceAccount/converge-system/converge-controller",
	"Role/converge-system/converge-controller-leader-election",
	"RoleBinding/converge-system/converge-controller-leader-election",
	"Service/converge-system/converge-controller",
	"Deployment/converge-system/converge-controller",
}

// installed is the first `converge install` of the shared cluster, run
// once by whichever test needs converge-controller first.
var installed struct {
	once sync.Once
	res  cluster.Result
}

// install runs `converge install` once for the test binary and fails t
// when it failed; it gives the Env and that first run.
func install(t *testing.T) (*cluster.Env, cluster.Result) {
	t.Helper()
	e := cluster.Shared(t)
	installed.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		installed.res = e.Converge(ctx, "install", "--timeout", "3m")
	})
	if installed.res.Err != nil {
		t.Fatalf("%s\ncontroller: %s", installed.res, controllerState(e))
	}
	return e, installed.res
}

// controllerPod gives the one converge-controller pod.
func controllerPod(ctx context.Context, e *cluster.Env) (*corev1.Pod, error) {
	pods, err := podsOf(ctx, e.Clientset, controllerNS, controllerSel)
	if err != nil {
		return nil, err
	}
	if len(pods) != 1 {
		return nil, fmt.Errorf("%d converge-controller pods, want 1", len(pods))
	}
	return &pods[0], nil
}

// controllerState describes the controller's pod and the tail of its
// log, for failures.
func controllerState(e *cluster.Env) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := controllerPod(ctx, e)
	if err != nil {
		return err.Error()
	}
	log, err := podLog(ctx, e.Clientset, p.Namespace, p.Name, "manager", false)
	if err != nil {
		log = err.Error()
	}
	if len(log) > 4000 {
		log = "…" + log[len(log)-4000:]
	}
	return describePod(p) + "\nlog:\n" + log
}

// TestInstall: the converge CLI built with the test version installs
// converge-controller as a user does (`converge install`, the cluster's
// kubeconfig): a Deployment of the image the same version's `make images`
// builds, imported into containerd, whose pod passes its readiness probe
// in a namespace enforcing the restricted Pod Security Standard (non-root,
// read-only root filesystem, no capabilities), starts its servers and the
// Sync controller as its log says, registers the hco-webhook with the
// CA of the certificate it issued, and answers on its push receiver at
// the Pod IP; a second install changes nothing.
func TestInstall(t *testing.T) {
	e := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	if r := e.Converge(ctx, "version"); r.Err != nil || r.Stdout != "converge "+e.Version+"\n" {
		t.Fatalf("%s\nwant stdout %q", r, "converge "+e.Version+"\n")
	}
	e, r := install(t)
	t.Logf("converge install: %s to converge-controller ready", r.Took.Round(time.Millisecond))
	for _, l := range bundleLines {
		if !strings.Contains(r.Stdout, l+" created\n") {
			t.Errorf("converge install printed no %q:\n%s", l+" created", r.Stdout)
		}
	}
	if !strings.Contains(r.Stderr, "converge-controller is ready") {
		t.Errorf("converge install did not wait for the controller:\n%s", r.Stderr)
	}

	t.Run("Deployment of the version's image", func(t *testing.T) {
		d := &appsv1.Deployment{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: controllerNS, Name: controllerName}, d); err != nil {
			t.Fatal(err)
		}
		want := images.ControllerReference(e.Version)
		if got := d.Spec.Template.Spec.Containers[0].Image; got != want || e.Images.Controller.Reference != want {
			t.Errorf("Deployment image %q, image built %q, want both %q", got, e.Images.Controller.Reference, want)
		}
		if d.Status.ReadyReplicas != 1 || d.Status.AvailableReplicas != 1 {
			t.Errorf("Deployment: %d ready, %d available replicas, want 1", d.Status.ReadyReplicas, d.Status.AvailableReplicas)
		}
		ns := &corev1.Namespace{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: controllerNS}, ns); err != nil {
			t.Fatal(err)
		}
		if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
			t.Errorf("namespace %s enforces %q, want restricted (the pod must pass it)", controllerNS, got)
		}
	})

	p, err := controllerPod(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("pod Ready from the imported image", func(t *testing.T) {
		if !podReady(p) || len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("not ready: %s", describePod(p))
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 0 {
			t.Errorf("the manager restarted %d times: %s", cs.RestartCount, controllerState(e))
		}
		if !strings.HasSuffix(cs.ImageID, e.Images.Controller.ConfigDigest) && !strings.HasSuffix(cs.ImageID, e.Images.Controller.Digest) {
			t.Errorf("container image ID %q is not the built image (config %s, manifest %s)", cs.ImageID, e.Images.Controller.ConfigDigest, e.Images.Controller.Digest)
		}
		sc := p.Spec.Containers[0].SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || p.Spec.SecurityContext.RunAsUser == nil || *p.Spec.SecurityContext.RunAsUser != 65532 {
			t.Errorf("the pod does not run as 65532 on a read-only root filesystem: %+v %+v", p.Spec.SecurityContext, sc)
		}
	})

	t.Run("log says it started", func(t *testing.T) {
		var log string
		eventually(t, time.Minute, "the controller's log shows its servers and the Sync workers", func() (bool, string) {
			l, err := podLog(ctx, e.Clientset, controllerNS, p.Name, "manager", false)
			if err != nil {
				return false, err.Error()
			}
			log = l
			for _, want := range []string{`"msg":"Successfully acquired lease"`, `"msg":"receiver serving"`, `"msg":"Serving webhook server"`,
				`"msg":"Starting workers","controller":"sync"`, `"msg":"the hco-webhook ` + hcoWebhookName + ` registered"`} {
				if !strings.Contains(l, want) {
					return false, "no " + want
				}
			}
			return true, ""
		})
		noErrorLogged(t, log)
	})

	t.Run("hco-webhook registered with the issued CA", func(t *testing.T) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: hcoWebhookName}, vwc); err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: controllerNS, Name: "converge-webhook-cert"}, secret); err != nil {
			t.Fatal(err)
		}
		for _, w := range vwc.Webhooks {
			svc := w.ClientConfig.Service
			if svc == nil || svc.Namespace != controllerNS || svc.Name != controllerName {
				t.Errorf("webhook %s calls %+v, want the Service %s/%s", w.Name, w.ClientConfig, controllerNS, controllerName)
			}
			if len(w.ClientConfig.CABundle) == 0 || !strings.Contains(string(w.ClientConfig.CABundle), strings.TrimSpace(string(secret.Data["ca.crt"]))) {
				t.Errorf("webhook %s: caBundle does not hold the CA of Secret converge-webhook-cert", w.Name)
			}
		}
		if len(vwc.Webhooks) == 0 {
			t.Error("the configuration has no webhooks")
		}
	})

	t.Run("receiver answers at the Pod IP", func(t *testing.T) {
		base := fmt.Sprintf("http://%s:%d", p.Status.PodIP, receiverPort)
		code, body := httpDo(t, http.MethodGet, base+"/hook/"+controllerNS+"/missing")
		if code != http.StatusMethodNotAllowed {
			t.Errorf("GET: %d %q, want 405", code, body)
		}
		// An unknown path (here the former /hook/<namespace>/<name>) is
		// answered as any unknown path, without naming anything.
		code, body = httpDo(t, http.MethodPost, base+"/hook/"+controllerNS+"/missing")
		// (httpDo trims the body: http.NotFound's is "404 page not found\n")
		if code != http.StatusNotFound || body != "404 page not found" {
			t.Errorf("POST to an unknown hook path: %d %q, want 404 %q", code, body, "404 page not found")
		}
	})

	t.Run("cli-download serves the CLI of the version", func(t *testing.T) {
		// through the API server's service proxy, as `kubectl get --raw`
		// reaches a Service: the host has no kube-proxy route to ClusterIPs
		rel := runtime.GOARCH + "/linux/converge"
		path := "/api/v1/namespaces/" + controllerNS + "/services/https:" + controllerName + ":https-cli-download/proxy/"
		bin, err := e.Clientset.CoreV1().RESTClient().Get().AbsPath(path + rel).DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET %s: %v", path+rel, err)
		}
		sums, err := e.Clientset.CoreV1().RESTClient().Get().AbsPath(path + "SHA256SUMS").DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET SHA256SUMS: %v", err)
		}
		sum := sha256.Sum256(bin)
		if want := hex.EncodeToString(sum[:]) + "  " + rel; !strings.Contains(string(sums), want) {
			t.Errorf("SHA256SUMS %q does not list %q", sums, want)
		}
		f := filepath.Join(t.TempDir(), "converge")
		if err := os.WriteFile(f, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(f, "version").CombinedOutput()
		if err != nil || string(out) != "converge "+e.Version+"\n" {
			t.Errorf("downloaded converge version: %q %v, want %q", out, err, "converge "+e.Version)
		}
		t.Logf("downloaded %s (%d bytes) from the cli-download Service", rel, len(bin))
	})

	t.Run("second install changes nothing", func(t *testing.T) {
		r := e.Converge(ctx, "install", "--timeout", "1m")
		if r.Err != nil {
			t.Fatal(r)
		}
		for _, l := range bundleLines {
			if !strings.Contains(r.Stdout, l+" unchanged\n") {
				t.Errorf("second install: no %q:\n%s", l+" unchanged", r.Stdout)
			}
		}
		again, err := controllerPod(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if again.UID != p.UID {
			t.Errorf("the second install replaced the controller's pod %s by %s", p.Name, again.Name)
		}
	})
}

// noErrorLogged fails t for each error line of the controller's log.
func noErrorLogged(t *testing.T, log string) {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"error"`) {
			t.Errorf("the controller logged an error: %s", l)
		}
	}
}

// httpDo sends an empty request from the host and gives the status and
// trimmed body.
func httpDo(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
