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
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

const testNS = "hooks"

// startAPIServer starts a control plane, installs the Sync CRD generated
// by the graph engine and waits until it is Established, and creates the
// test namespace. The client knows v1alpha1.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	c := controlplane.StartForTest(t)
	if err := v1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
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
	return c
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

func TestHandler(t *testing.T) {
	c := startAPIServer(t)
	create(t, c, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "hook-token"},
		Data:       map[string][]byte{TokenKey: testToken},
	})
	create(t, c, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "no-token"},
		Data:       map[string][]byte{"other": []byte("x")},
	})
	create(t, c, newSync("main", &v1alpha1.GitRef{Branch: "main"}, "hook-token"))
	create(t, c, newSync("semver", &v1alpha1.GitRef{SemVer: "^1"}, "hook-token"))
	create(t, c, newSync("default-branch", nil, "hook-token"))
	suspended := newSync("suspended", nil, "hook-token")
	suspended.Spec.Suspend = true
	create(t, c, suspended)
	create(t, c, newSync("no-receiver", &v1alpha1.GitRef{Branch: "main"}, ""))
	create(t, c, newSync("missing-secret", nil, "absent"))
	create(t, c, newSync("no-token-key", nil, "no-token"))

	tr := &triggers{}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, &Handler{Reader: c, Trigger: tr.trigger, Log: testr.New(t), MaxBodyBytes: 1 << 20})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	mainKey := types.NamespacedName{Namespace: testNS, Name: "main"}
	push := func(ref string) []byte { return []byte(`{"ref":"` + ref + `","after":"0123","commits":[]}`) }
	mainPush := push("refs/heads/main")
	ghSig := sign("sha256", sha256.New, mainPush, testToken)
	big := append(append([]byte(`{"ref":"refs/heads/main","pad":"`), bytes.Repeat([]byte("x"), 1<<20)...), '"', '}')
	form := []byte("payload=" + url.QueryEscape(string(mainPush)))

	tests := []struct {
		name    string
		method  string
		key     types.NamespacedName
		header  http.Header
		body    []byte
		chunked bool // send without Content-Length
		status  int
		trigger bool
		reply   string // substring of the answer
	}{
		{name: "valid GitHub push", key: mainKey, body: mainPush,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, ghSig),
			status: 200, trigger: true, reply: "reconcile of hooks/main requested"},
		{name: "valid GitHub form-encoded push", key: mainKey, body: form,
			header: header(GitHubEventHeader, "push", "Content-Type", "application/x-www-form-urlencoded", GitHubSignatureHeader, sign("sha256", sha256.New, form, testToken)),
			status: 200, trigger: true},
		{name: "valid GitLab push", key: mainKey, body: mainPush,
			header: header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, string(testToken)),
			status: 200, trigger: true},
		{name: "valid generic sha256", key: mainKey, body: mainPush,
			header: header(SignatureHeader, ghSig), status: 200, trigger: true},
		{name: "valid generic sha512, body not JSON", key: mainKey, body: []byte("deploy please"),
			header: header(SignatureHeader, sign("sha512", sha512.New, []byte("deploy please"), testToken)), status: 200, trigger: true},
		{name: "valid generic sha1", key: mainKey, body: mainPush,
			header: header(SignatureHeader, sign("sha1", sha1.New, mainPush, testToken)), status: 200, trigger: true},
		{name: "GitHub ping", key: mainKey, body: []byte(`{"zen":"Keep it logically awesome."}`),
			header: header(GitHubEventHeader, "ping", GitHubSignatureHeader, sign("sha256", sha256.New, []byte(`{"zen":"Keep it logically awesome."}`), testToken)),
			status: 200, reply: "pong"},
		{name: "GitHub ping with wrong signature", key: mainKey, body: []byte(`{}`),
			header: header(GitHubEventHeader, "ping", GitHubSignatureHeader, ghSig), status: 401},
		{name: "GitHub other event", key: mainKey, body: mainPush,
			header: header(GitHubEventHeader, "pull_request", GitHubSignatureHeader, ghSig), status: 202, reply: "ignored"},
		{name: "GitHub wrong signature", key: mainKey, body: mainPush,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, sign("sha256", sha256.New, mainPush, []byte("wrong"))), status: 401},
		{name: "GitHub missing signature", key: mainKey, body: mainPush,
			header: header(GitHubEventHeader, "push"), status: 401},
		{name: "GitLab wrong token", key: mainKey, body: mainPush,
			header: header(GitLabEventHeader, "Push Hook", GitLabTokenHeader, "wrong"), status: 401},
		{name: "generic missing signature", key: mainKey, body: mainPush, header: header(), status: 401},
		{name: "GitHub push not JSON", key: mainKey, body: []byte("nope"),
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, sign("sha256", sha256.New, []byte("nope"), testToken)), status: 400},
		{name: "unknown Sync", key: types.NamespacedName{Namespace: testNS, Name: "absent"}, body: mainPush,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, ghSig), status: 404, reply: "no receiver for hooks/absent\n"},
		{name: "unknown namespace", key: types.NamespacedName{Namespace: "nowhere", Name: "main"}, body: mainPush,
			header: header(SignatureHeader, ghSig), status: 404, reply: "no receiver for nowhere/main\n"},
		{name: "Sync without receiver", key: types.NamespacedName{Namespace: testNS, Name: "no-receiver"}, body: mainPush,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, ghSig), status: 404, reply: "no receiver for hooks/no-receiver\n"},
		{name: "receiver Secret missing", key: types.NamespacedName{Namespace: testNS, Name: "missing-secret"}, body: mainPush,
			header: header(SignatureHeader, ghSig), status: 500},
		{name: "receiver Secret without token", key: types.NamespacedName{Namespace: testNS, Name: "no-token-key"}, body: mainPush,
			header: header(SignatureHeader, ghSig), status: 500},
		{name: "wrong branch", key: mainKey, body: push("refs/heads/other"),
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, sign("sha256", sha256.New, push("refs/heads/other"), testToken)),
			status: 202, reply: "ignored: push to refs/heads/other"},
		{name: "GitLab tag push to a branch Sync", key: mainKey, body: push("refs/tags/v1.0.0"),
			header: header(GitLabEventHeader, "Tag Push Hook", GitLabTokenHeader, string(testToken)),
			status: 202, reply: "ignored: push to refs/tags/v1.0.0"},
		{name: "GitLab tag push to a semver Sync", key: types.NamespacedName{Namespace: testNS, Name: "semver"}, body: push("refs/tags/v1.2.0"),
			header: header(GitLabEventHeader, "Tag Push Hook", GitLabTokenHeader, string(testToken)), status: 200, trigger: true},
		{name: "branch push to a semver Sync", key: types.NamespacedName{Namespace: testNS, Name: "semver"}, body: mainPush,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, ghSig), status: 202, reply: "ignored: push to refs/heads/main"},
		{name: "any branch push to a default-branch Sync", key: types.NamespacedName{Namespace: testNS, Name: "default-branch"}, body: push("refs/heads/other"),
			header: header(SignatureHeader, sign("sha256", sha256.New, push("refs/heads/other"), testToken)), status: 200, trigger: true},
		{name: "push to a suspended Sync", key: types.NamespacedName{Namespace: testNS, Name: "suspended"}, body: mainPush,
			header: header(SignatureHeader, ghSig), status: 202, reply: "ignored: hooks/suspended is suspended"},
		{name: "push to a suspended Sync, wrong signature", key: types.NamespacedName{Namespace: testNS, Name: "suspended"}, body: mainPush,
			header: header(SignatureHeader, sign("sha256", sha256.New, mainPush, []byte("wrong"))), status: 401},
		{name: "oversized body", key: mainKey, body: big,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, sign("sha256", sha256.New, big, testToken)), status: 413},
		{name: "oversized body without Content-Length", key: mainKey, body: big, chunked: true,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, sign("sha256", sha256.New, big, testToken)), status: 413},
		{name: "GET", method: http.MethodGet, key: mainKey, header: header(), status: 405},
		{name: "PUT with a valid signature", method: http.MethodPut, key: mainKey, body: mainPush,
			header: header(GitHubEventHeader, "push", GitHubSignatureHeader, ghSig), status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			var body io.Reader = bytes.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: chunked encoding
			}
			req, err := http.NewRequest(method, srv.URL+Path(tt.key), body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header[k] = v
			}
			start := time.Now()
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("%d %q in %s", resp.StatusCode, got, time.Since(start))
			if resp.StatusCode != tt.status {
				t.Errorf("status: got %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.reply != "" && !strings.Contains(string(got), tt.reply) {
				t.Errorf("reply: got %q, want it to contain %q", got, tt.reply)
			}
			if tt.status == 405 && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow header: got %q, want POST", resp.Header.Get("Allow"))
			}
			if strings.Contains(string(got), string(testToken)) {
				t.Errorf("reply reveals the token: %q", got)
			}
			keys := tr.take()
			switch {
			case tt.trigger && (len(keys) != 1 || keys[0] != tt.key):
				t.Errorf("Trigger: got %v, want exactly [%s]", keys, tt.key)
			case !tt.trigger && len(keys) != 0:
				t.Errorf("Trigger fired with %v, want no trigger", keys)
			}
		})
	}

	// The 404 body is the same whether the Sync or its receiver is missing.
	t.Run("404 bodies do not tell a missing Sync from a missing receiver", func(t *testing.T) {
		answer := func(name string) string {
			resp, err := srv.Client().Post(srv.URL+Path(types.NamespacedName{Namespace: testNS, Name: name}), "application/json", bytes.NewReader(mainPush))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return strings.ReplaceAll(string(b), name, "<name>")
		}
		if a, b := answer("absent"), answer("no-receiver"); a != b {
			t.Errorf("bodies differ: %q vs %q", a, b)
		}
	})
}

func TestPath(t *testing.T) {
	k := types.NamespacedName{Namespace: "ns", Name: "a.b"}
	if got := Path(k); got != "/hook/ns/a.b" {
		t.Errorf("Path: got %q", got)
	}
	if got, ok := parsePath(Path(k)); !ok || got != k {
		t.Errorf("parsePath(Path(%s)): got %v %v", k, got, ok)
	}
}
