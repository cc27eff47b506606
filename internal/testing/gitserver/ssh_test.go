package gitserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestSSHServesGitCLI clones over the in-process SSH server with the real
// git and OpenSSH clients, with strict host key checking; a key the server
// does not know is refused.
func TestSSHServesGitCLI(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	root := t.TempDir()
	r := NewRepo(t, root, "cfg", "main")
	sha := r.Commit(t, "one", map[string]string{"a.yaml": "a: 1\n"})
	key := NewSSHKey(t, "")
	srv := NewSSH(t, root, SSHOptions{AuthorizedKeys: []ssh.PublicKey{key.Public}})

	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kh := write("known_hosts", srv.KnownHosts)
	clone := func(keyFile, dst string) ([]byte, error) {
		cmd := exec.Command("git", "clone", "-q", srv.RepoURL(r), dst)
		cmd.Env = append(os.Environ(), append(Env, "GIT_SSH_COMMAND=ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="+kh+" -i "+keyFile)...)
		return cmd.CombinedOutput()
	}
	if out, err := clone(write("id", key.PrivatePEM), filepath.Join(dir, "ok")); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	if got := Git(t, filepath.Join(dir, "ok"), "rev-parse", "HEAD"); got != sha {
		t.Fatalf("cloned HEAD %s, want %s", got, sha)
	}
	out, err := clone(write("other", NewSSHKey(t, "").PrivatePEM), filepath.Join(dir, "refused"))
	if err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("clone with an unknown key: %v\n%s", err, out)
	}
	if n := srv.Execs.Load(); n != 1 {
		t.Fatalf("Execs = %d, want 1", n)
	}
}
