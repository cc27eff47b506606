package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/nodeclient"
)

// escapeByte is Ctrl+], which ends `converge vm console` as it ends
// `virtctl console` (kubevirt pkg/virtctl/console).
const escapeByte = 0x1d

func newVMConsole(g *globals) *cobra.Command {
	var ns, token string
	cmd := &cobra.Command{
		Use:   "console NAME",
		Short: "Attach to the serial console of a VirtualMachineInstance (Ctrl+] quits)",
		Long: `console streams the serial console of the VirtualMachineInstance NAME through
the converge-node agent of its node: it reads status.nodeName, the Node's
console address and certificate fingerprint (annotations
vm.converge.dev/console-address and vm.converge.dev/console-cert-sha256),
and connects with the kubeconfig's bearer token, which the agent checks with
a TokenReview and authorizes with a SubjectAccessReview for get on
virtualmachineinstances/console in subresources.kubevirt.io (KubeVirt's
RBAC). A kubeconfig that authenticates with a client certificate has no
token to pass on: give one with --token (e.g. kubectl create token NAME).

When stdin is a terminal it is put in raw mode. Ctrl+] quits, as in
virtctl console; so does the end of stdin or of the console.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsole(cmd.Context(), g, cmd.InOrStdin(), ns, args[0], token)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "default", "namespace of the VirtualMachineInstance")
	cmd.Flags().StringVar(&token, "token", "", "bearer token for the node's console server (default: the kubeconfig's)")
	return cmd
}

func runConsole(ctx context.Context, g *globals, stdin io.Reader, ns, name, token string) error {
	cfg, err := g.restConfig()
	if err != nil {
		return err
	}
	if token == "" {
		if token, err = bearerToken(cfg); err != nil {
			return err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: vmScheme})
	if err != nil {
		return err
	}
	ep, err := consoleEndpoint(ctx, c, ns, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := nodeclient.DialConsole(ctx, ep, token, ns, name)
	if err != nil {
		return fmt.Errorf("VirtualMachineInstance %s/%s: %w", ns, name, err)
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
		if err != nil {
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

// consoleEndpoint finds the node of VMI ns/name and its console endpoint.
func consoleEndpoint(ctx context.Context, c client.Client, ns, name string) (nodeendpoint.Endpoint, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return nodeendpoint.Endpoint{}, fmt.Errorf("VirtualMachineInstance %s/%s not found (is the VirtualMachine started? converge vm start %s -n %s)", ns, name, name, ns)
		}
		return nodeendpoint.Endpoint{}, fmt.Errorf("VirtualMachineInstance %s/%s: %w", ns, name, err)
	}
	if vmi.Status.NodeName == "" {
		return nodeendpoint.Endpoint{}, fmt.Errorf("VirtualMachineInstance %s/%s is not scheduled to a node yet (phase %s)", ns, name, vmi.Status.Phase)
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: vmi.Status.NodeName}, node); err != nil {
		return nodeendpoint.Endpoint{}, fmt.Errorf("VirtualMachineInstance %s/%s: Node %s: %w", ns, name, vmi.Status.NodeName, err)
	}
	ep, err := nodeendpoint.Console.FromNode(node)
	if err != nil {
		return nodeendpoint.Endpoint{}, fmt.Errorf("VirtualMachineInstance %s/%s: %w", ns, name, err)
	}
	return ep, nil
}

// errNoToken is the refusal when the kubeconfig has no bearer token.
var errNoToken = errors.New("the kubeconfig's user has no bearer token (it authenticates with a client certificate or a password), and the node's console server accepts only tokens: pass one with --token (e.g. --token \"$(kubectl create token NAME)\")")

// bearerToken gives the token the kubeconfig would send to the API server
// (a token, a token file, an exec or auth-provider plugin), by running a
// request through client-go's authentication wrappers, or errNoToken.
func bearerToken(cfg *rest.Config) (string, error) {
	var got string
	rt, err := rest.HTTPWrappersForConfig(cfg, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Get("Authorization")
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	}))
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	req, err := http.NewRequest(http.MethodGet, "https://console.invalid/", nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", fmt.Errorf("kubeconfig: getting a bearer token: %w", err)
	}
	_ = resp.Body.Close()
	scheme, token, ok := strings.Cut(got, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errNoToken
	}
	return token, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
