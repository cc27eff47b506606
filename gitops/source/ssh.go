package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"time"

	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/net/proxy"
)

// sshAuth is the go-git SSH AuthMethod for an Auth with an Identity: public
// key auth, host keys checked against KnownHosts only (never the user's
// ~/.ssh/known_hosts), host key algorithms restricted to the ones
// known_hosts lists for the host, as OpenSSH does.
type sshAuth struct {
	user     string
	signer   ssh.Signer
	hostKeys *knownhosts.HostKeyDB
	addr     string // host:port, for HostKeyAlgorithms
	timeout  time.Duration
}

var _ gitssh.AuthMethod = (*sshAuth)(nil)

func (a *sshAuth) Name() string { return "ssh-public-key" }

// String names the user and key fingerprint; go-git may print it.
func (a *sshAuth) String() string {
	return fmt.Sprintf("user: %s, key: %s", a.user, ssh.FingerprintSHA256(a.signer.PublicKey()))
}

func (a *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	return &ssh.ClientConfig{
		User:              a.user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(a.signer)},
		HostKeyCallback:   a.checkHostKey,
		HostKeyAlgorithms: a.hostKeys.HostKeyAlgorithms(a.addr),
		Timeout:           a.timeout,
	}, nil
}

// checkHostKey checks the server's key against known_hosts and says which
// key was offered when it does not match.
func (a *sshAuth) checkHostKey(hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := a.hostKeys.HostKeyCallback()(hostname, remote, key)
	switch {
	case err == nil:
		return nil
	case knownhosts.IsHostKeyChanged(err):
		return fmt.Errorf("host key %s of %s does not match known_hosts: %w", ssh.FingerprintSHA256(key), hostname, err)
	case knownhosts.IsHostUnknown(err):
		return fmt.Errorf("host %s (key %s) is not in known_hosts: %w", hostname, ssh.FingerprintSHA256(key), err)
	}
	return err
}

// newSSHAuth builds the AuthMethod for ep from a (validated for SSH).
func newSSHAuth(a *Auth, ep endpoint, timeout time.Duration) (*sshAuth, error) {
	signer, err := a.signer()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	db, err := parseKnownHosts(a.KnownHosts)
	if err != nil {
		return nil, fmt.Errorf("%w: KnownHosts: %w", ErrAuthentication, err)
	}
	user := ep.user
	if user == "" {
		user = a.Username
	}
	if user == "" {
		user = "git"
	}
	return &sshAuth{user: user, signer: signer, hostKeys: db, addr: ep.hostPort, timeout: timeout}, nil
}

// parseKnownHosts reads known_hosts lines with skeema/knownhosts (as go-git
// does), which only reads files: the lines go through a private temporary
// file that is removed at once.
func parseKnownHosts(b []byte) (*knownhosts.HostKeyDB, error) {
	n := 0
	for rest := b; len(rest) > 0; n++ {
		var err error
		_, _, _, _, rest, err = ssh.ParseKnownHosts(rest)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("entry %d is not a known_hosts line", n+1)
		}
	}
	if n == 0 {
		return nil, errors.New("no host keys")
	}
	f, err := os.CreateTemp("", "converge-known-hosts-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, err
	}
	db, err := knownhosts.NewDB(f.Name())
	if err != nil {
		// The message quotes the file name, not the content.
		return nil, errors.New("not in known_hosts format")
	}
	return db, nil
}

// deadlineScheme is a golang.org/x/net/proxy dialer type registered at
// init. go-git's SSH transport bounds only the TCP dial by
// ssh.ClientConfig.Timeout and ignores the context during the SSH handshake
// and the transfer; routing the connection through this "proxy" (a direct
// dial) sets a deadline on the connection itself, so a server that accepts
// TCP and then never answers fails after the timeout. The timeout travels in
// the proxy URL's query ("?timeout=30s").
const deadlineScheme = "converge-deadline"

func init() {
	proxy.RegisterDialerType(deadlineScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		d, err := time.ParseDuration(u.Query().Get("timeout"))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("gitops: bad %s proxy URL %q", deadlineScheme, u)
		}
		return deadlineDialer{timeout: d}, nil
	})
}

// deadlineProxyURL is the ProxyOptions.URL that applies timeout to an SSH
// connection.
func deadlineProxyURL(timeout time.Duration) string {
	return (&url.URL{Scheme: deadlineScheme, Host: "direct", RawQuery: url.Values{"timeout": {timeout.String()}}.Encode()}).String()
}

// deadlineDialer dials directly and gives the connection a deadline of
// timeout from now, for the whole SSH session (one go-git network
// operation).
type deadlineDialer struct{ timeout time.Duration }

func (d deadlineDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d deadlineDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	deadline := time.Now().Add(d.timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}
