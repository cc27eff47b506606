package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// escapeByte is Ctrl+], which ends `converge vm console` as it ends
// `virtctl console` (kubevirt pkg/virtctl/console).
const escapeByte = 0x1d

func newVMConsole(g *globals) *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "console NAME",
		Short: "Attach to the serial console of a VirtualMachineInstance (Ctrl+] quits)",
		Long: `console streams the serial console of the VirtualMachineInstance NAME through
KubeVirt's console subresource, as virtctl console does: a WebSocket (subprotocol
plain.kubevirt.io) to /apis/subresources.kubevirt.io/v1/namespaces/NS/
virtualmachineinstances/NAME/console on the API server, which authenticates
the kubeconfig's user (a token, a client certificate, an exec plugin) and
authorizes get on virtualmachineinstances/console (KubeVirt's kubevirt.io:edit
and kubevirt.io:admin roles grant it); converge-controller's virt-api
streams it to the console server of the VMI's node.

When stdin is a terminal it is put in raw mode. Ctrl+] quits, as in
virtctl console; so does the end of stdin or of the console.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsole(cmd.Context(), g, cmd.InOrStdin(), ns, args[0])
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "default", "namespace of the VirtualMachineInstance")
	return cmd
}

func runConsole(ctx context.Context, g *globals, stdin io.Reader, ns, name string) error {
	cfg, err := g.restConfig()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := dialConsole(ctx, cfg, ns, name)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(g.stderr, "Successfully connected to %s console. The escape sequence is ^]\n", name)
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		state, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("stdin: raw terminal mode: %w", err)
		}
		defer func() { _ = term.Restore(int(f.Fd()), state) }()
	}
	out := make(chan error, 1)
	go func() {
		_, err := io.Copy(g.stdout, s)
		out <- err
	}()
	in := make(chan error, 1)
	go func() { in <- copyUntilEscape(s, stdin) }()
	select {
	case err := <-out:
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("VirtualMachineInstance %s/%s: %w", ns, name, err)
		}
		fmt.Fprintf(g.stderr, "\r\nThe console of %s/%s ended.\r\n", ns, name)
		return nil
	case err := <-in:
		if err != nil {
			return err
		}
		return nil
	case <-ctx.Done():
		return nil
	}
}

// plainStreamProtocol is KubeVirt's console subprotocol
// (subresources.PlainStreamProtocolName): binary messages of the
// console's bytes.
const plainStreamProtocol = "plain.kubevirt.io"

// dialConsole opens the console subresource of VMI ns/name on cfg's API
// server with cfg's credentials (TLS client certificate, bearer token or
// plugin, through client-go's wrappers, as KubeVirt's client does) over
// HTTP/1.1, and gives the stream. A refusal is worded from the server's
// Status.
func dialConsole(ctx context.Context, cfg *rest.Config, ns, name string) (io.ReadWriteCloser, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	proxy := http.ProxyFromEnvironment
	if cfg.Proxy != nil {
		proxy = cfg.Proxy
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, &http.Transport{TLSClientConfig: tlsConfig, Proxy: proxy})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: server %q: %w", cfg.Host, err)
	}
	u.Path = path.Join(u.Path, "/apis", subresourcesGV.String(), "namespaces", ns, "virtualmachineinstances", name, "console")
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: &http.Client{Transport: rt}, Subprotocols: []string{plainStreamProtocol}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, consoleRefusal(ns, name, resp)
		}
		return nil, fmt.Errorf("VirtualMachineInstance %s/%s: %w", ns, name, err)
	}
	ws.SetReadLimit(-1)
	return websocket.NetConn(ctx, ws, websocket.MessageBinary), nil
}

// consoleRefusal words the API server's refusal of a console: its Status
// (KubeVirt's messages) when the body is one, else the status line.
func consoleRefusal(ns, name string, resp *http.Response) error {
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	st := &metav1.Status{}
	if json.Unmarshal(body, st) != nil || st.Kind != "Status" {
		return fmt.Errorf("VirtualMachineInstance %s/%s: the API server answered %s", ns, name, resp.Status)
	}
	err := subresourceError("VirtualMachineInstance", "virtualmachineinstance", ns, name, apierrors.FromObject(st))
	if apierrors.IsNotFound(apierrors.FromObject(st)) && st.Details != nil && st.Details.Kind == "virtualmachineinstance" {
		return fmt.Errorf("%w (is the VirtualMachine started? converge vm start %s -n %s)", err, name, ns)
	}
	return err
}

// copyUntilEscape copies stdin to the console until Ctrl+] (the bytes
// before it are sent) or the end of stdin.
func copyUntilEscape(dst io.Writer, stdin io.Reader) error {
	buf := make([]byte, 1024)
	for {
		n, err := stdin.Read(buf)
		chunk := buf[:n]
		esc := bytes.IndexByte(chunk, escapeByte)
		if esc >= 0 {
			chunk = chunk[:esc]
		}
		if len(chunk) > 0 {
			if _, werr := dst.Write(chunk); werr != nil {
				return werr
			}
		}
		if esc >= 0 || errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
	}
}
