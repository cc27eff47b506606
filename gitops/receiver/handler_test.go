package receiver

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

const testNS = "hooks"

// startAPIServer starts a control plane, installs the Sync CRD generated
// by the graph engine and waits until it is Established, and creates the
// test namespace. The client knows v1alpha1; the Env gives its
// rest.Config.
func startAPIServer(t *testing.T) (*controlplane.Env, client.Client) {
	t.Helper()
	env, c, _ := controlplane.StartEnvForTest(t, v1alpha1.AddToScheme)
	ctx := context.Background()
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := e.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("creating CRD %s: %v", crd.GetName(), err)
	}
	controlplane.Eventually(t, 30*time.Second, func() bool {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, got); err != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil {
		t.Fatal(err)
	}
	return env, c
}

func newSync(name string, ref *v1alpha1.GitRef, secret string) *v1alpha1.Sync {
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.GitSource{
			URL: "https://git.example.com/org/config.git",
			Ref: ref,
		}},
	}
	if secret != "" {
		s.Spec.Receiver = &v1alpha1.Receiver{SecretRef: v1alpha1.LocalObjectReference{Name: secret}}
	}
	return s
}

// create creates obj, retrying while the client's REST mapper does not
// know the new kind yet.
func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	var err error
	controlplane.Eventually(t, 30*time.Second, func() bool {
		err = c.Create(context.Background(), obj)
		return err == nil || !strings.Contains(err.Error(), "no matches for kind")
	})
	if err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// triggers records the keys Trigger was called with.
type triggers struct {
	mu   sync.Mutex
	keys []types.NamespacedName
}

func (tr *triggers) trigger(k types.NamespacedName) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.keys = append(tr.keys, k)
}

func (tr *triggers) take() []types.NamespacedName {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	k := tr.keys
	tr.keys = nil
	return k
}

// countingTransport counts the requests that reach the API server.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// countedReaders gives two readers of the API server whose requests are
// counted: an informer cache of Syncs, started and synced (what the
// controller passes, mgr.GetClient() reads from one), and a direct
// client, warmed up so that its REST mapper knows Syncs (a Get is then
// exactly one request).
func countedReaders(t *testing.T, env *controlplane.Env, scheme *runtime.Scheme) (cached, direct client.Reader, cachedCalls, directCalls *atomic.Int64) {
	t.Helper()
	counted := func(n *atomic.Int64) *rest.Config {
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, n: n} })
		return cfg
	}
	cachedCalls, directCalls = &atomic.Int64{}, &atomic.Int64{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ca, err := cache.New(counted(cachedCalls), cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.GetInformer(ctx, &v1alpha1.Sync{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("the Sync cache did not sync")
	}
	dc, err := client.New(counted(directCalls), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.Get(ctx, types.NamespacedName{Namespace: testNS, Name: "main"}, &v1alpha1.Sync{}); err != nil {
		t.Fatal(err)
	}
	return ca, dc, cachedCalls, directCalls
}

// answer is what an outsider sees of a response.
type answer struct {
	status            int
	body, contentType string
	nosniff           string
}

// TestHandler sends every kind of request to two Handlers sharing one
// Index: one reading Syncs from an informer cache (as the controller
// does) and one reading them straight from the API server, and checks
// the answers, the triggers and the API requests each request cost: none
// through the cache, and through the direct reader none before
// authentication (one Get of the Sync for an authenticated push).
func TestHandler(t *testing.T) {
	env, c := startAPIServer(t)
	create(t, c, newSync("main", &v1alpha1.GitRef{Branch: "main"}, "hook-token"))
	create(t, c, newSync("semver", &v1alpha1.GitRef{SemVer: "^1"}, "hook-token"))
	create(t, c, newSync("default-branch", nil, "hook-token"))
	suspended := newSync("suspended", nil, "hook-token")
	suspended.Spec.Suspend = true
	create(t, c, suspended)
	create(t, c, newSync("no-receiver", &v1alpha1.GitRef{Branch: "main"}, ""))
	create(t, c, newSync("other", &v1alpha1.GitRef{Branch: "main"}, "other-token"))
	cached, direct, cachedCalls, directCalls := countedReaders(t, env, c.Scheme())

	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: testNS, Name: name} }
	otherToken := []byte("other-token")
	// The index as the Sync controller leaves it: every Sync with a
	// receiver, plus "no-receiver" (its spec.receiver was just removed)
	// and "absent" (just deleted), which the next reconcile drops.
	idx := &Index{}
	for name, tok := range map[string][]byte{"main": testToken, "semver": testToken, "default-branch": testToken,
		"suspended": testToken, "no-receiver": testToken, "absent": testToken, "other": otherToken} {
		if _, err := idx.Set(key(name), tok); err != nil {
			t.Fatal(err)
		}
	}
	at := func(name string) string { return Path(key(name), testToken) }

	var cachedTr, directTr triggers
	mux := func(r client.Reader, tr *triggers) *http.ServeMux {
		m := http.NewServeMux()
		m.Handle(PathPrefix, &Handler{Index: idx, Reader: r, Trigger: tr.trigger, Log: testr.New(t), MaxBodyBytes: 1 << 20})
		return m
	}
	servers := []struct {
		name  string
		srv   *httptest.Server
		tr    *triggers
		calls *atomic.Int64
	}{
		{"cached", httptest.NewServer(mux(cached, &cachedTr)), &cachedTr, cachedCalls},
		{"direct", httptest.NewServer(mux(direct, &directTr)), &directTr, directCalls},
	}
	for _, s := range servers {
		t.Cleanup(s.srv.Close)
	}
	do := func(t *testing.T, srv *httptest.Server, method, path string, h http.Header, body []byte, chunked bool) answer {
		t.Helper()
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // hides the length: chunked encoding
		}
		req, err := http.NewRequest(method, srv.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("405 with Allow %q, want POST", resp.Header.Get("Allow"))
		}
		return answer{resp.StatusCode, string(b), resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options")}
	}
	// notFound is what any path outside the hooks answers.
	notFound := do(t, servers[0].srv, http.MethodPost, "/elsewhere", nil, nil, false)
	if notFound.status != http.StatusNotFound {
		t.Fatalf("the mux answers %d for an unknown path", notFound.status)
	}

	push := func(ref string) []byte { return []byte(`{"ref":"` + ref + `","after":"0123","commits":[]}`) }
	mainPush := push("refs/heads/main")
	ghSig := sign("sha256", sha256.New, mainPush, testToken)
	gh := func(sig string) http.Header { return header(GitHubEventHeader, "push", GitHubSignatureHeader, sig) }
	big := append(append([]byte(`{"ref":"refs/heads/main","pad":"`), bytes.Repeat([]byte("x"), 1<<20)...), '"', '}')
	form := []byte("payload=" + url.QueryEscape(string(mainPush)))
	ping := []byte(`{"zen":"Keep it logically awesome."}`)

	tests := []struct {
		name    string
		method  string
		path    string
		header  http.Header
		body    []byte
		chunked bool // send without Content-Length
		status  int
		reply   string // substring of the answer; "" with status 404: exactly notFound
		trigger string // the Sync triggered, by name
		reads   int64  // API requests through the direct reader
	}{
		{name: "valid GitHub push", path: at("main"), body: mainPush, header: gh(ghSig),
			status: 200, trigger: "main", reads: 1, reply: "reconcile of hooks/main requested"},
		{name: "valid GitHub form-encoded push", path: at("main"), body: form,
			header: header(GitHubEventHeader, "push", "Content-Type", "application/x-www-form-urlencoded", GitHubSignatureHeader, sign("sha256", sha256.New, form, testToken)),
			status: 200, trigger: "main", reads: 1},
		{name: "valid GitLab push", path: at("main"), body: mainPush,
			header: header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, string(testToken)), status: 200, trigger: "main", reads: 1},
		{name: "valid generic sha256", path: at("main"), body: mainPush, header: header(SignatureHeader, ghSig), status: 200, trigger: "main", reads: 1},
		{name: "valid generic sha512, body not JSON", path: at("main"), body: []byte("deploy please"),
			header: header(SignatureHeader, sign("sha512", sha512.New, []byte("deploy please"), testToken)), status: 200, trigger: "main", reads: 1},
		{name: "valid generic sha1", path: at("main"), body: mainPush,
			header: header(SignatureHeader, sign("sha1", sha1.New, mainPush, testToken)), status: 200, trigger: "main", reads: 1},
		{name: "valid push to another Sync's path", path: Path(key("other"), otherToken), body: mainPush,
			header: gh(sign("sha256", sha256.New, mainPush, otherToken)), status: 200, trigger: "other", reads: 1},
		{name: "GitHub ping", path: at("main"), body: ping,
			header: header(GitHubEventHeader, "ping", GitHubSignatureHeader, sign("sha256", sha256.New, ping, testToken)), status: 200, reply: "pong"},
		{name: "GitHub other event", path: at("main"), body: mainPush,
			header: header(GitHubEventHeader, "pull_request", GitHubSignatureHeader, ghSig), status: 202, reply: "ignored"},
		{name: "GitHub push not JSON", path: at("main"), body: []byte("nope"),
			header: gh(sign("sha256", sha256.New, []byte("nope"), testToken)), status: 400, reads: 1},

		// Unauthenticated, at a known path: the answer of an unknown path.
		{name: "GitHub ping with wrong signature", path: at("main"), body: []byte(`{}`),
			header: header(GitHubEventHeader, "ping", GitHubSignatureHeader, ghSig), status: 404},
		{name: "GitHub wrong signature", path: at("main"), body: mainPush,
			header: gh(sign("sha256", sha256.New, mainPush, []byte("wrong"))), status: 404},
		{name: "GitHub missing signature", path: at("main"), body: mainPush, header: header(GitHubEventHeader, "push"), status: 404},
		{name: "GitHub signature of another body", path: at("main"), body: push("refs/heads/evil"), header: gh(ghSig), status: 404},
		{name: "GitLab wrong token", path: at("main"), body: mainPush,
			header: header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, "wrong"), status: 404},
		{name: "generic missing signature", path: at("main"), body: mainPush, header: header(), status: 404},
		{name: "one Sync's token at another's path", path: Path(key("other"), otherToken), body: mainPush, header: gh(ghSig), status: 404},
		{name: "push to a suspended Sync, wrong signature", path: at("suspended"), body: mainPush,
			header: header(SignatureHeader, sign("sha256", sha256.New, mainPush, []byte("wrong"))), status: 404},

		// Unknown paths, with a valid signature.
		{name: "former path /hook/<namespace>/<name>", path: "/hook/hooks/main", body: mainPush, header: gh(ghSig), status: 404},
		{name: "path of a Sync with another token", path: Path(key("main"), []byte("guess")), body: mainPush, header: gh(ghSig), status: 404},
		{name: "path of a Sync never indexed", path: Path(key("nowhere"), testToken), body: mainPush, header: gh(ghSig), status: 404},
		{name: "known path with a trailing slash", path: at("main") + "/", body: mainPush, header: gh(ghSig), status: 404},
		{name: "known digest upper-cased", path: PathPrefix + strings.ToUpper(strings.TrimPrefix(at("main"), PathPrefix)), body: mainPush, header: gh(ghSig), status: 404},
		{name: "prefix alone", path: PathPrefix, body: mainPush, header: gh(ghSig), status: 404},

		// Authenticated, but the Sync no longer takes pushes.
		{name: "indexed Sync deleted", path: at("absent"), body: mainPush, header: gh(ghSig), status: 404, reads: 1},
		{name: "indexed Sync without receiver", path: at("no-receiver"), body: mainPush, header: gh(ghSig), status: 404, reads: 1},

		// The ref filter and suspension.
		{name: "wrong branch", path: at("main"), body: push("refs/heads/other"),
			header: gh(sign("sha256", sha256.New, push("refs/heads/other"), testToken)), status: 202, reply: "ignored: push to refs/heads/other", reads: 1},
		{name: "GitLab tag push to a branch Sync", path: at("main"), body: push("refs/tags/v1.0.0"),
			header: header(GitLabEventHeader, "Tag Push Hook", GitLabTokenHeader, string(testToken)), status: 202, reply: "ignored: push to refs/tags/v1.0.0", reads: 1},
		{name: "GitLab tag push to a semver Sync", path: at("semver"), body: push("refs/tags/v1.2.0"),
			header: header(GitLabEventHeader, "Tag Push Hook", GitLabTokenHeader, string(testToken)), status: 200, trigger: "semver", reads: 1},
		{name: "branch push to a semver Sync", path: at("semver"), body: mainPush, header: gh(ghSig), status: 202, reply: "ignored: push to refs/heads/main", reads: 1},
		{name: "any branch push to a default-branch Sync", path: at("default-branch"), body: push("refs/heads/other"),
			header: header(SignatureHeader, sign("sha256", sha256.New, push("refs/heads/other"), testToken)), status: 200, trigger: "default-branch", reads: 1},
		{name: "push to a suspended Sync", path: at("suspended"), body: mainPush, header: header(SignatureHeader, ghSig),
			status: 202, reply: "ignored: hooks/suspended is suspended", reads: 1},

		// Answered before the path is looked up, the same at every path.
		{name: "oversized body", path: at("main"), body: big, header: gh(sign("sha256", sha256.New, big, testToken)), status: 413},
		{name: "oversized body, unknown path", path: "/hook/nothing", body: big, header: gh(sign("sha256", sha256.New, big, testToken)), status: 413},
		{name: "oversized body without Content-Length", path: at("main"), body: big, chunked: true,
			header: gh(sign("sha256", sha256.New, big, testToken)), status: 413},
		{name: "oversized body without Content-Length, unknown path", path: "/hook/nothing", body: big, chunked: true, header: gh(ghSig), status: 413},
		{name: "GET", method: http.MethodGet, path: at("main"), header: header(), status: 405},
		{name: "GET, unknown path", method: http.MethodGet, path: "/hook/nothing", header: header(), status: 405},
		{name: "PUT with a valid signature", method: http.MethodPut, path: at("main"), body: mainPush, header: gh(ghSig), status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			for _, s := range servers {
				before := s.calls.Load()
				start := time.Now()
				got := do(t, s.srv, method, tt.path, tt.header, tt.body, tt.chunked)
				calls := s.calls.Load() - before
				t.Logf("%s: %d %q in %s, %d API requests", s.name, got.status, got.body, time.Since(start), calls)
				if got.status != tt.status {
					t.Errorf("%s: status %d, want %d", s.name, got.status, tt.status)
				}
				if tt.status == http.StatusNotFound && tt.reply == "" && got != notFound {
					t.Errorf("%s: answer %+v, want the answer of an unknown path %+v", s.name, got, notFound)
				}
				if tt.reply != "" && !strings.Contains(got.body, tt.reply) {
					t.Errorf("%s: reply %q, want it to contain %q", s.name, got.body, tt.reply)
				}
				if strings.Contains(got.body, string(testToken)) {
					t.Errorf("%s: reply reveals the token: %q", s.name, got.body)
				}
				want := tt.reads
				if s.name == "cached" {
					want = 0
				}
				if calls != want {
					t.Errorf("%s reader: %d API requests, want %d", s.name, calls, want)
				}
				keys := s.tr.take()
				switch {
				case tt.trigger != "" && (len(keys) != 1 || keys[0] != key(tt.trigger)):
					t.Errorf("%s: Trigger got %v, want exactly [%s]", s.name, keys, key(tt.trigger))
				case tt.trigger == "" && len(keys) != 0:
					t.Errorf("%s: Trigger fired with %v, want no trigger", s.name, keys)
				}
			}
		})
	}
}
