package synccontroller_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/gitserver"
)

// newGPGKey makes an ed25519 signing key for uid in a fresh GNUPGHOME
// (gitserver.NewGPGHome); it skips the test when gpg is not installed.
func newGPGKey(t *testing.T, uid string) gitserver.GPGKey {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		t.Skip("gpg is not installed")
	}
	return gitserver.NewGPGKey(t, gitserver.NewGPGHome(t), uid)
}

// toCluster2 makes a Sync target cluster 2, where the earlier subtests
// left the example's objects (orphaned): a Sync reaches Ready there in
// seconds.
func toCluster2(s *v1alpha1.Sync) {
	s.Spec.Target = &v1alpha1.Target{KubeConfig: v1alpha1.KubeConfigReference{SecretRef: v1alpha1.LocalObjectReference{Name: "cluster2"}}}
}

func migrations(t *testing.T, e *testEnv) int64 {
	t.Helper()
	kv, err := get(e.c2, "kubevirt.io/v1", "KubeVirt", kvKey)
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedInt64(kv.Object, "spec", "configuration", "migrations", "parallelMigrationsPerCluster")
	return v
}

// testVerification: a Sync with spec.source.verify applies a commit
// signed by a trusted OpenPGP key (SourceVerified=True names the key);
// an unsigned commit after it is refused: Ready=False and Stalled=True
// VerificationFailed, the last applied revision kept, and nothing of it
// applied (it changes the KubeVirt CR, which keeps its old value).
func testVerification(t *testing.T, e *testEnv) {
	alice := newGPGKey(t, "Alice <alice@example.com>")
	repo := gitserver.NewRepo(t, filepath.Dir(e.repo.Dir), "signed", "main")
	gitserver.Git(t, repo.Dir, "config", "gpg.program", "gpg")
	gitserver.Git(t, repo.Dir, "config", "user.signingkey", alice.Fingerprint)
	repo.CopyDir(t, filepath.Join("..", "..", "testdata", "example"), ".")
	signed := "main@sha1:" + repo.Commit(t, "signed example", nil, "-S")
	e.create(t, e.c1, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "signing-keys"},
		Data: map[string][]byte{"alice.asc": alice.Armored}})
	key := e.sync(t, "verified", func(s *v1alpha1.Sync) {
		toCluster2(s)
		s.Spec.Source.URL = e.git.RepoURL(repo)
		s.Spec.Source.Verify = &v1alpha1.Verification{Mode: "HEAD", SecretRef: v1alpha1.LocalObjectReference{Name: "signing-keys"}}
	})
	s, d := e.wait(t, key, time.Minute, "signed revision applied", readyAt(signed))
	t.Logf("signed commit verified and applied in %s", d)
	if c := condition(s, v1alpha1.SourceVerifiedCondition); c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "OpenPGP key "+alice.KeyID) || !strings.Contains(c.Message, "alice.asc") {
		t.Errorf("SourceVerified = %+v, want True naming OpenPGP key %s (alice.asc)", c, alice.KeyID)
	}
	if v := migrations(t, e); v != 5 {
		t.Fatalf("KubeVirt parallelMigrationsPerCluster = %d after the signed commit, want 5", v)
	}

	unsigned := repo.Replace(t, "unsigned: nine migrations", "hyperconverged.yaml", "parallelMigrationsPerCluster: 5", "parallelMigrationsPerCluster: 9")
	e.request(t, key)
	s, d = e.wait(t, key, time.Minute, "VerificationFailed", func(s *v1alpha1.Sync) bool {
		return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.VerificationFailedReason
	})
	t.Logf("unsigned commit refused %s after the reconcile request", d)
	if c := condition(s, v1alpha1.ReadyCondition); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, unsigned) || !strings.Contains(c.Message, "is not signed") {
		t.Errorf("Ready = %+v, want False naming the unsigned commit %s", c, unsigned)
	}
	if c := condition(s, v1alpha1.StalledCondition); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.VerificationFailedReason {
		t.Errorf("Stalled = %+v, want True VerificationFailed", c)
	}
	if c := condition(s, v1alpha1.SourceVerifiedCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("SourceVerified = %+v, want False", c)
	}
	if s.Status.LastAppliedRevision != signed || s.Status.LastAttemptedRevision != signed {
		t.Errorf("lastApplied %q, lastAttempted %q after the unsigned commit, want both %s", s.Status.LastAppliedRevision, s.Status.LastAttemptedRevision, signed)
	}
	if v := migrations(t, e); v != 5 {
		t.Errorf("KubeVirt parallelMigrationsPerCluster = %d: the unsigned commit was applied", v)
	}
	if len(e.events(t, key.Name)[v1alpha1.VerificationFailedReason]) == 0 {
		t.Error("no VerificationFailed event")
	}
	e.deleteSync(t, key, v1alpha1.DeletionPolicyOrphan)
}

// testAuth: for each transport, a Sync whose credentials the Git server
// refuses (or whose server it cannot authenticate) fails with
// AuthenticationFailed, not stalled, naming the URL and never the
// secret; once the Secret holds the right credentials the Sync applies
// the repository. Its retryInterval is 1h, so only the Secret watch can
// retry it within the test.
func testAuth(t *testing.T, e *testEnv) {
	root := filepath.Dir(e.repo.Dir)
	tlsSrv := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{TLS: true})
	otherCA := gitserver.NewHTTP(t, t.TempDir(), gitserver.HTTPOptions{TLS: true}).CAPEM
	bearer := gitserver.NewHTTP(t, root, gitserver.HTTPOptions{BearerToken: "good-token-123"})
	client, stranger := gitserver.NewSSHKey(t, ""), gitserver.NewSSHKey(t, "")
	sshSrv := gitserver.NewSSH(t, root, gitserver.SSHOptions{AuthorizedKeys: []ssh.PublicKey{client.Public}})
	// secretLine is a line of the stranger's private key, which must not
	// leak into a message.
	secretLine := strings.Split(string(stranger.PrivatePEM), "\n")[1]

	for _, tc := range []struct {
		name, url string
		bad, good map[string][]byte
		// secret is a credential of bad that no message may contain.
		secret string
		// why is a fragment of the failure message.
		why string
	}{
		{"https custom CA", tlsSrv.RepoURL(e.repo),
			map[string][]byte{"ca.crt": otherCA}, map[string][]byte{"ca.crt": tlsSrv.CAPEM}, "", "certificate"},
		{"bearer token", bearer.RepoURL(e.repo),
			map[string][]byte{"bearerToken": []byte("wrong-token-456")}, map[string][]byte{"bearerToken": []byte("good-token-123")}, "wrong-token-456", ""},
		{"ssh", sshSrv.RepoURL(e.repo),
			map[string][]byte{"identity": stranger.PrivatePEM, "known_hosts": sshSrv.KnownHosts},
			map[string][]byte{"identity": client.PrivatePEM, "known_hosts": sshSrv.KnownHosts}, secretLine, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ToLower(strings.ReplaceAll(tc.name, " ", "-"))
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name + "-auth"}, Data: tc.bad}
			e.create(t, e.c1, sec)
			key := e.sync(t, name, func(s *v1alpha1.Sync) {
				toCluster2(s)
				s.Spec.Source.URL = tc.url
				s.Spec.Source.SecretRef = &v1alpha1.LocalObjectReference{Name: sec.Name}
				s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
			})
			s, _ := e.wait(t, key, time.Minute, "AuthenticationFailed", func(s *v1alpha1.Sync) bool {
				return condition(s, v1alpha1.ReadyCondition).Reason == v1alpha1.AuthenticationFailedReason
			})
			c := condition(s, v1alpha1.ReadyCondition)
			t.Logf("wrong credentials: %s", c.Message)
			host := strings.SplitN(strings.SplitN(tc.url, "://", 2)[1], "/", 2)[0]
			if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, host) || !strings.Contains(c.Message, tc.why) {
				t.Errorf("Ready = %+v, want False naming %s and %q", c, host, tc.why)
			}
			if tc.secret != "" && strings.Contains(mustJSON(s.Status), tc.secret) {
				t.Errorf("the status shows the secret %q: %s", tc.secret, mustJSON(s.Status))
			}
			if r := condition(s, v1alpha1.ReconcilingCondition); r.Status != metav1.ConditionTrue || r.Reason != v1alpha1.ProgressingWithRetryReason {
				t.Errorf("Reconciling = %+v, want True ProgressingWithRetry (a fixed Secret is retried)", r)
			}
			sec.Data = tc.good
			if err := e.c1.Update(t.Context(), sec); err != nil {
				t.Fatal(err)
			}
			_, d := e.wait(t, key, time.Minute, "Ready with the right credentials", readyAt(e.head(t)))
			t.Logf("Ready %s after the Secret was fixed (retryInterval 1h)", d)
			e.deleteSync(t, key, v1alpha1.DeletionPolicyOrphan)
		})
	}
}
