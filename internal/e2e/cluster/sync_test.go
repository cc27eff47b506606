package cluster_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/receiver"
	"github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/gitserver"
)

// The Sync `converge install --sync-url` creates, and the example's
// objects.
const (
	syncName    = "converge"
	configPath  = "cluster" // the example's directory in the repository
	hcNamespace = "kubevirt-hyperconverged"
	hcName      = "kubevirt-hyperconverged"
	hcFile      = configPath + "/hyperconverged.yaml"
)

// synced is the Sync of the example the tests share, made once.
var synced struct {
	once sync.Once
	repo *gitserver.Repo
	srv  *gitserver.HTTP
	sha  string
	res  cluster.Result
	err  error
}

// syncExample puts testdata/example into a repository of a Git server
// listening on the node address, and creates a Sync of it with `converge
// install --sync-url` (once per test binary; the server lives until the
// tests end). It gives the repository, the server and the commit.
func syncExample(t *testing.T) (*cluster.Env, *gitserver.Repo, *gitserver.HTTP, string) {
	t.Helper()
	e, _ := install(t)
	synced.once.Do(func() {
		root, err := os.MkdirTemp("", "converge-e2e-git-")
		if err != nil {
			synced.err = err
			return
		}
		// Git runs as root here and the server's repositories outlive t.
		tb := &onceTB{TB: t}
		synced.repo = gitserver.NewRepo(tb, root, "config", "main")
		synced.repo.CopyDir(tb, filepath.Join("..", "..", "..", "testdata", "example"), configPath)
		synced.sha = synced.repo.Commit(tb, "the example", nil)
		synced.srv = gitserver.NewHTTP(tb, root, gitserver.HTTPOptions{Addr: localcluster.NodeIP + ":0"})
		// The example's hostpath pool is a host directory: removed at the
		// end when the Sync's operators made it.
		if _, err := os.Stat(poolPath); errors.Is(err, os.ErrNotExist) {
			atEnd = append(atEnd, func() { _ = os.RemoveAll(poolPath) })
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		synced.res = e.Converge(ctx, "install", "--sync-url", synced.srv.RepoURL(synced.repo), "--sync-path", configPath, "--timeout", "1m")
	})
	if synced.err != nil {
		t.Fatal(synced.err)
	}
	if synced.res.Err != nil {
		t.Fatal(synced.res)
	}
	return e, synced.repo, synced.srv, synced.sha
}

// onceTB is the test that made the shared Git server: its failures fail
// that test, but its Cleanup runs at the end of the test binary (the
// server serves later tests too) and its log goes to stderr (the test may
// be over when git http-backend writes).
type onceTB struct{ testing.TB }

// Cleanup defers f to the end of the test binary (atEnd).
func (o *onceTB) Cleanup(f func()) { atEnd = append(atEnd, f) }

// Logf writes to stderr.
func (o *onceTB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Log writes to stderr.
func (o *onceTB) Log(args ...any) { fmt.Fprintln(os.Stderr, args...) }

// atEnd are the deferred cleanups of shared fixtures, run by TestMain
// before the cluster stops, last first.
var atEnd []func()

// getSync reads the example's Sync.
func getSync(ctx context.Context, e *cluster.Env) (*v1alpha1.Sync, error) {
	s := &v1alpha1.Sync{}
	return s, e.Client.Get(ctx, client.ObjectKey{Namespace: controllerNS, Name: syncName}, s)
}

// TestSync: the Sync `converge install --sync-url` creates makes the
// in-cluster converge-controller fetch the example from a Git server on
// the node address and apply it: the CRDs, the HyperConverged and the
// operand CRs of the first stages are in the cluster and in the Sync's
// inventory, every component is listed in status.components and by
// `converge tree`, `converge get syncs` shows it. The hco-webhook it
// registered refuses, through the API server, a HyperConverged change
// `converge vet` refuses, with vet's message, in both served versions
// (v1beta1 through the CRD's conversion webhook). A signed push to the
// receiver at the Pod IP is accepted and the pushed commit is applied.
// converge's native operators then turn every operand CR Available and
// the Sync Ready.
func TestSync(t *testing.T) {
	e, repo, srv, sha := syncExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if !strings.Contains(synced.res.Stdout, "Sync/"+controllerNS+"/"+syncName+" created\n") {
		t.Errorf("converge install --sync-url printed no Sync line:\n%s", synced.res.Stdout)
	}
	revision := "main@sha1:" + sha

	var s *v1alpha1.Sync
	eventually(t, 2*time.Minute, "the Sync applies revision "+revision, func() (bool, string) {
		var err error
		if s, err = getSync(ctx, e); err != nil {
			return false, err.Error()
		}
		// A reconcile is over when Ready is True or waits for health (a
		// reconcile starts with Ready=Unknown Progressing).
		ready := apimeta.FindStatusCondition(s.Status.Conditions, "Ready")
		done := ready != nil && (ready.Status == metav1.ConditionTrue || ready.Reason == "WaitingForHealth")
		if s.Status.LastAttemptedRevision != revision || s.Status.Inventory == nil || len(s.Status.Components) == 0 || !done {
			return false, fmt.Sprintf("revision %q, conditions %v", s.Status.LastAttemptedRevision, s.Status.Conditions)
		}
		return true, ""
	})
	if srv.Requests.Load() == 0 {
		t.Errorf("the Git server on %s served no request", srv.URL)
	}

	t.Run("applied", func(t *testing.T) {
		for _, c := range s.Status.Conditions {
			if c.Status == metav1.ConditionFalse && (c.Type == "Ready" || c.Type == "Healthy") {
				t.Errorf("condition %s=False %s: %s", c.Type, c.Reason, c.Message)
			}
		}
		ids := map[string]string{}
		for _, en := range s.Status.Inventory.Entries {
			ids[en.ID] = en.Component
		}
		for id, comp := range map[string]string{
			"_hyperconvergeds.hco.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition":                      "crds",
			"_kubevirts.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition":                                "crds",
			"_hostpathprovisioners.hostpathprovisioner.kubevirt.io_apiextensions.k8s.io_CustomResourceDefinition": "crds",
			"_volumesnapshots.snapshot.storage.k8s.io_apiextensions.k8s.io_CustomResourceDefinition":              "crds",
			hcNamespace + "_" + hcName + "_hco.kubevirt.io_HyperConverged":                                        "hco",
			hcNamespace + "_kubevirt-" + hcName + "_kubevirt.io_KubeVirt":                                         "virt",
			"_cdi-" + hcName + "_cdi.kubevirt.io_CDI":                                                             "cdi",
			"_cluster_networkaddonsoperator.network.kubevirt.io_NetworkAddonsConfig":                              "cnao",
		} {
			if got, ok := ids[id]; !ok || got != comp {
				t.Errorf("inventory entry %s: component %q (present %v), want %q", id, got, ok, comp)
			}
		}
		for _, o := range []struct{ apiVersion, kind, ns, name string }{
			{"hco.kubevirt.io/v1", "HyperConverged", hcNamespace, hcName},
			{"kubevirt.io/v1", "KubeVirt", hcNamespace, "kubevirt-" + hcName},
			{"cdi.kubevirt.io/v1beta1", "CDI", "", "cdi-" + hcName},
			{"networkaddonsoperator.network.kubevirt.io/v1", "NetworkAddonsConfig", "", "cluster"},
		} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(o.apiVersion)
			u.SetKind(o.kind)
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: o.ns, Name: o.name}, u); err != nil {
				t.Errorf("%s %s/%s: %v", o.kind, o.ns, o.name, err)
				continue
			}
			if u.GetLabels()["converge.dev/name"] != hcName {
				t.Errorf("%s %s/%s: labels %v lack converge.dev/name=%s", o.kind, o.ns, o.name, u.GetLabels(), hcName)
			}
		}
	})

	t.Run("components listed", func(t *testing.T) {
		var names []string
		for _, c := range s.Status.Components {
			names = append(names, c.Name)
			if !slices.Contains([]string{"Healthy", "Progressing", "Waiting"}, c.Health) {
				t.Errorf("component %s: health %q (%s)", c.Name, c.Health, c.Message)
			}
		}
		for _, want := range []string{"hco", "virt", "cdi", "cnao", "hpp"} {
			if !slices.Contains(names, want) {
				t.Errorf("status.components %v lack %s", names, want)
			}
		}
		r := e.Converge(ctx, "get", "syncs", "-n", controllerNS)
		if r.Err != nil || !strings.Contains(r.Stdout, syncName) {
			t.Errorf("%s\nwant the Sync %s listed", r, syncName)
		}
		r = e.Converge(ctx, "tree", syncName, "-n", controllerNS)
		if r.Err != nil {
			t.Fatal(r)
		}
		for _, want := range append([]string{"Sync/" + controllerNS + "/" + syncName, "HyperConverged/" + hcNamespace + "/" + hcName,
			"CustomResourceDefinition/volumesnapshotcontents.snapshot.storage.k8s.io [Current]"}, names...) {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("converge tree lacks %q:\n%s", want, r.Stdout)
			}
		}
	})

	t.Run("hco-webhook refuses what converge vet refuses", func(t *testing.T) {
		vetLines := vetRefusal(t, ctx, e, repo, "duration: 48h0m0s", "duration: 5m")
		for _, v := range []struct {
			version string
			path    []string
			want    string
		}{
			{"v1", []string{"spec", "security", "certConfig", "ca", "duration"}, "spec.security.certConfig.ca: duration (5m) must be at least 10m"},
			{"v1beta1", []string{"spec", "certConfig", "ca", "duration"}, "spec.certConfig.ca: duration (5m) must be at least 10m"},
		} {
			hc := &unstructured.Unstructured{}
			hc.SetAPIVersion("hco.kubevirt.io/" + v.version)
			hc.SetKind("HyperConverged")
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: hcName}, hc); err != nil {
				t.Fatalf("reading the HyperConverged as %s: %v", v.version, err)
			}
			if err := unstructured.SetNestedField(hc.Object, "5m", v.path...); err != nil {
				t.Fatal(err)
			}
			err := e.Client.Update(ctx, hc, client.DryRunAll)
			if err == nil {
				t.Errorf("%s: an update with ca duration 5m was admitted", v.version)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, `denied the request`) || !strings.Contains(msg, "HyperConverged "+hcNamespace+"/"+hcName+": "+v.want) {
				t.Errorf("%s: refused with %q, want the hco-webhook's denial naming HyperConverged %s/%s: %s", v.version, msg, hcNamespace, hcName, v.want)
			}
			if v.version == "v1beta1" {
				for _, l := range vetLines {
					if !strings.Contains(msg, l) {
						t.Errorf("v1beta1 denial lacks converge vet's %q: %s", l, msg)
					}
				}
			}
		}
	})

	t.Run("push to the receiver at the Pod IP applies the commit", func(t *testing.T) {
		const token = "e2e-receiver-token"
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: "receiver"}, StringData: map[string]string{"token": token}}
		if err := e.Client.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"spec":{"receiver":{"secretRef":{"name":"receiver"}}}}`)
		if err := e.Client.Patch(ctx, &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: syncName}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		p, err := controllerPod(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		// The hook's path is published in status.webhookPath once the
		// controller read the token.
		key := types.NamespacedName{Namespace: controllerNS, Name: syncName}
		path := receiver.Path(key, []byte(token))
		eventually(t, time.Minute, "status.webhookPath is the digest of the token", func() (bool, string) {
			s := &v1alpha1.Sync{}
			if err := e.Client.Get(ctx, key, s); err != nil {
				return false, err.Error()
			}
			return s.Status.WebhookPath == path, "status.webhookPath " + s.Status.WebhookPath
		})
		hook := fmt.Sprintf("http://%s:%d%s", p.Status.PodIP, receiverPort, path)
		next := repo.Replace(t, "parallel migrations 7", hcFile, "parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 7")
		hc := &http.Client{Timeout: 10 * time.Second}
		for _, tc := range []struct {
			token string
			code  int
			body  string
		}{
			{"wrong-token", http.StatusNotFound, "404 page not found"},
			{token, http.StatusOK, "reconcile of " + controllerNS + "/" + syncName + " requested"},
		} {
			resp, err := hc.Do(gitserver.GitHubPush(t, hook, tc.token, "main", next))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.body) {
				t.Errorf("push signed with %q: %d %q, want %d with %q", tc.token, resp.StatusCode, b, tc.code, tc.body)
			}
		}
		kv := &unstructured.Unstructured{}
		kv.SetAPIVersion("kubevirt.io/v1")
		kv.SetKind("KubeVirt")
		eventually(t, time.Minute, "the pushed commit reaches the KubeVirt CR", func() (bool, string) {
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "kubevirt-" + hcName}, kv); err != nil {
				return false, err.Error()
			}
			n, _, _ := unstructured.NestedInt64(kv.Object, "spec", "configuration", "migrations", "parallelMigrationsPerCluster")
			s, err := getSync(ctx, e)
			if err != nil {
				return false, err.Error()
			}
			return n == 7 && s.Status.LastAttemptedRevision == "main@sha1:"+next, fmt.Sprintf("parallelMigrationsPerCluster %d, revision %s", n, s.Status.LastAttemptedRevision)
		})
	})

	t.Run("controller logged no error", func(t *testing.T) {
		p, err := controllerPod(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		log, err := podLog(ctx, e.Clientset, controllerNS, p.Name, "manager", false)
		if err != nil {
			t.Fatal(err)
		}
		noErrorLogged(t, log)
	})

	t.Run("the kubelet pulled converge's images through the registry mirror", func(t *testing.T) {
		if e.Registry == nil {
			t.Fatal("the shared cluster imports its images: no registry to pull from")
		}
		for _, ref := range []string{e.Images.Controller.Reference, e.Images.Node.Reference} {
			r, err := name.ParseReference(ref)
			if err != nil {
				t.Fatal(err)
			}
			if n := e.Registry.Pulls(r.Context().RepositoryStr()); n == 0 {
				t.Errorf("%s: no manifest GET of %s on the registry %s: the kubelet did not pull it through the %s mirror",
					ref, r.Context().RepositoryStr(), e.Registry.Endpoint, e.Registry.Mirrored)
			}
		}
	})

	t.Run("native operators: Sync Ready, every operand CR Available", func(t *testing.T) {
		waitSyncReady(t, ctx, e)
		// Native mode derives the SSP on plain Kubernetes too, a later
		// stage than the first reconcile's (it depends on virt and cdi).
		s, err := getSync(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		ssp := hcNamespace + "_ssp-" + hcName + "_ssp.kubevirt.io_SSP"
		found := false
		for _, en := range s.Status.Inventory.Entries {
			found = found || (en.ID == ssp && en.Component == "ssp")
		}
		if !found {
			t.Errorf("no inventory entry %s of component ssp", ssp)
		}
	})

	t.Run("CDI's upload API and upload proxy serve once the CDI is native", func(t *testing.T) {
		// upload.cdi.kubevirt.io through the API server's aggregation
		// layer, as virtctl creates its token request
		var token string
		req := []byte(`{"apiVersion":"upload.cdi.kubevirt.io/v1beta1","kind":"UploadTokenRequest","metadata":{"name":"e2e"},"spec":{"pvcName":"no-such-disk"}}`)
		eventually(t, 2*time.Minute, "an UploadTokenRequest answered with status.token", func() (bool, string) {
			raw, err := e.Clientset.CoreV1().RESTClient().Post().AbsPath("/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/default/uploadtokenrequests").
				SetHeader("Content-Type", "application/json").Body(req).DoRaw(ctx)
			if err != nil {
				return false, err.Error()
			}
			var utr struct {
				Status struct {
					Token string `json:"token"`
				} `json:"status"`
			}
			if json.Unmarshal(raw, &utr) != nil || utr.Status.Token == "" {
				return false, string(raw)
			}
			token = utr.Status.Token
			return true, ""
		})
		// the proxy at the Pod IP (the API server's service proxy would
		// drop the bearer token): a token for a PVC that does not exist is
		// CDI's 503, a forged one 401
		p, err := controllerPod(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the Pod IP is not in the Service's certificate
		for _, tc := range []struct {
			token string
			code  int
			msg   string
		}{{token, http.StatusServiceUnavailable, "rejecting Upload Request for PVC no-such-disk that doesn't exist"}, {token + "x", http.StatusUnauthorized, "upload token refused"}} {
			r, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("https://%s:8445/v1beta1/upload", p.Status.PodIP), strings.NewReader("not an image"))
			r.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := hc.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
				t.Errorf("upload proxy: %d %q, want %d %q", resp.StatusCode, b, tc.code, tc.msg)
			}
		}
	})

	t.Run("the VM agent probed KVM and says why on the Node", func(t *testing.T) {
		// The probe's verdict depends on the machine (this one's /dev/kvm
		// is PVM-backed and hangs guests: False KVMIsPVM); every verdict
		// names its reason and the facts that decided it.
		eventually(t, 2*time.Minute, "the Node has the "+v1alpha1.KVMCondition+" condition", func() (bool, string) {
			n := &corev1.Node{}
			if err := e.Client.Get(ctx, client.ObjectKey{Name: e.Cluster.NodeName}, n); err != nil {
				return false, err.Error()
			}
			for _, c := range n.Status.Conditions {
				if string(c.Type) != v1alpha1.KVMCondition {
					continue
				}
				want := map[string]bool{v1alpha1.KVMReasonGuestRan: c.Status == corev1.ConditionTrue,
					v1alpha1.KVMReasonDeviceMissing: c.Status == corev1.ConditionFalse, v1alpha1.KVMReasonPVM: c.Status == corev1.ConditionFalse,
					v1alpha1.KVMReasonNoHardwareVirtualization: c.Status == corev1.ConditionFalse, v1alpha1.KVMReasonGuestFailed: c.Status == corev1.ConditionFalse}
				if !want[c.Reason] || c.Message == "" {
					return false, fmt.Sprintf("%s=%s %s: %q, want a probe verdict with its facts", c.Type, c.Status, c.Reason, c.Message)
				}
				t.Logf("Node %s: %s=%s %s: %s", n.Name, c.Type, c.Status, c.Reason, c.Message)
				return true, ""
			}
			return false, fmt.Sprintf("conditions %v", n.Status.Conditions)
		})
	})
}

// filePosition is the position vet puts before each error.
var filePosition = regexp.MustCompile(`^\S+:\d+:\d+: `)

// vetRefusal commits nothing: it runs `converge vet` on a copy of the
// repository's config with old replaced by new in the HyperConverged,
// checks that vet refuses it and gives its error lines without their
// file positions (what the hco-webhook prints after the object's name).
func vetRefusal(t *testing.T, ctx context.Context, e *cluster.Env, repo *gitserver.Repo, old, new string) []string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"hyperconverged.yaml", "hostpathprovisioner.yaml"} {
		b, err := os.ReadFile(filepath.Join(repo.Dir, configPath, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "hyperconverged.yaml" {
			if !strings.Contains(string(b), old) {
				t.Fatalf("%s: no %q", f, old)
			}
			b = []byte(strings.Replace(string(b), old, new, 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := e.Converge(ctx, "vet", dir)
	if r.Err == nil {
		t.Fatalf("converge vet accepted the change:\n%s", r)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		// "error: <file>:<line>:<col>: <path>: <message>" → "<path>: <message>"
		l = filePosition.ReplaceAllString(strings.TrimPrefix(l, "error: "), "")
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("converge vet printed no error lines:\n%s", r)
	}
	return lines
}
