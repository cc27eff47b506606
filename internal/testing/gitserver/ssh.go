package gitserver

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHOptions configure an SSH server.
type SSHOptions struct {
	// AuthorizedKeys are the client public keys the server accepts (public
	// key auth is the only method). Empty refuses every client.
	AuthorizedKeys []ssh.PublicKey
}

// SSH is an in-process SSH server (golang.org/x/crypto/ssh) on loopback
// that serves the repositories below Root to git clients: on an exec
// request for `git-upload-pack '<path>'` it runs the real git-upload-pack
// on Root/<path>, piping the session channel to it. Only fetching is
// served (no git-receive-pack, no shell).
type SSH struct {
	// Root holds the repositories; a Repo named n is at ssh://git@Addr/n.
	Root string
	// Addr is the listening address, "127.0.0.1:<port>".
	Addr string
	// HostKey is the server's host key (ed25519, fresh per server).
	HostKey ssh.PublicKey
	// KnownHosts is a known_hosts line for Addr and HostKey.
	KnownHosts []byte
	// Execs counts the upload-pack commands run.
	Execs atomic.Int64

	t        testing.TB
	config   *ssh.ServerConfig
	listener net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

// NewSSH starts an SSH server for the repositories below root, stopped at
// the end of the test.
func NewSSH(t testing.TB, root string, opts SSHOptions) *SSH {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	authorized := map[string]bool{}
	for _, k := range opts.AuthorizedKeys {
		authorized[string(k.Marshal())] = true
	}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if authorized[string(key.Marshal())] {
				return &ssh.Permissions{}, nil
			}
			return nil, fmt.Errorf("key %s is not authorized", ssh.FingerprintSHA256(key))
		},
	}
	config.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SSH{
		Root:     root,
		Addr:     l.Addr().String(),
		HostKey:  hostSigner.PublicKey(),
		t:        t,
		config:   config,
		listener: l,
		conns:    map[net.Conn]bool{},
	}
	s.KnownHosts = []byte(knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey) + "\n")
	s.wg.Go(s.serve)
	t.Cleanup(s.Close)
	return s
}

// RepoURL is the ssh:// URL of the repository r, with user "git".
func (s *SSH) RepoURL(r *Repo) string { return "ssh://git@" + s.Addr + "/" + r.Name }

// Close stops accepting connections, closes the open ones and waits for
// their goroutines to end.
func (s *SSH) Close() {
	s.listener.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *SSH) serve() {
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() { s.handle(conn) })
	}
}

func (s *SSH) handle(conn net.Conn) {
	s.mu.Lock()
	s.conns[conn] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	sconn, chans, reqs, err := ssh.NewServerConn(conn, s.config)
	if err != nil {
		return // refused client keys and dropped handshakes end here
	}
	defer sconn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.wg.Go(func() { s.session(ch, creqs) })
	}
}

// session serves one session channel: env requests are accepted and
// ignored, the first exec request runs, anything else is refused.
func (s *SSH) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "env":
			_ = req.Reply(true, nil)
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			dir, err := s.repoDir(payload.Command)
			if err != nil {
				_ = req.Reply(true, nil)
				fmt.Fprintf(ch.Stderr(), "fatal: %v\n", err)
				exitStatus(ch, 128)
				return
			}
			_ = req.Reply(true, nil)
			s.Execs.Add(1)
			exitStatus(ch, s.uploadPack(ch, dir))
			return
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// repoDir parses `git-upload-pack '<path>'` (quotes optional) and returns
// the directory below Root it names.
func (s *SSH) repoDir(command string) (string, error) {
	rest, ok := strings.CutPrefix(command, "git-upload-pack ")
	if !ok {
		return "", fmt.Errorf("only git-upload-pack is served, not %q", command)
	}
	p := strings.TrimSpace(rest)
	if len(p) >= 2 && p[0] == '\'' && p[len(p)-1] == '\'' {
		p = p[1 : len(p)-1]
	}
	p = strings.TrimPrefix(strings.TrimPrefix(p, "~/"), "/")
	clean := filepath.Clean(filepath.FromSlash(p))
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%q is outside the server root", p)
	}
	dir := filepath.Join(s.Root, clean)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("'%s' does not appear to be a git repository", p)
	}
	return dir, nil
}

// uploadPack runs git-upload-pack on dir with the channel as its stdio and
// returns its exit code.
func (s *SSH) uploadPack(ch ssh.Channel, dir string) int {
	cmd := exec.Command("git", "upload-pack", dir)
	cmd.Env = append(os.Environ(), Env...)
	var stderr bytes.Buffer
	cmd.Stdout = ch
	cmd.Stderr = io.MultiWriter(ch.Stderr(), &stderr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 128
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(ch.Stderr(), "fatal: %v\n", err)
		return 128
	}
	// The client closes its side only when it is done with the session;
	// do not make the exit wait for that.
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	err = cmd.Wait()
	if stderr.Len() > 0 {
		s.t.Logf("git-upload-pack %s: %s", dir, strings.TrimSpace(stderr.String()))
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return 128
}

func exitStatus(ch ssh.Channel, code int) {
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
}

// SSHKey is a client key pair for tests.
type SSHKey struct {
	// PrivatePEM is the OpenSSH-format private key, encrypted when made with
	// a passphrase.
	PrivatePEM []byte
	// Public is the public key.
	Public ssh.PublicKey
	// AuthorizedKey is Public as an authorized_keys line.
	AuthorizedKey []byte
}

// NewSSHKey makes a fresh ed25519 client key; a non-empty passphrase
// encrypts the private key (bcrypt KDF, as ssh-keygen does).
func NewSSHKey(t testing.TB, passphrase string) SSHKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "test key")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test key", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return SSHKey{PrivatePEM: pem.EncodeToMemory(block), Public: sshPub, AuthorizedKey: ssh.MarshalAuthorizedKey(sshPub)}
}
