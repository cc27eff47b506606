package nodeclient

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/converge-dev/converge/api/nodeendpoint"
)

// UploadRefusedError is a non-200 answer of the upload server.
type UploadRefusedError struct {
	// Code is the HTTP status code.
	Code int
	// Message is the server's one-line reason.
	Message string
}

// Error gives "upload server answered CODE TEXT: MESSAGE".
func (e *UploadRefusedError) Error() string {
	return fmt.Sprintf("upload server answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// UploadOptions tune Upload; the zero value is a synchronous upload to a
// pinned certificate.
type UploadOptions struct {
	// Insecure accepts any server certificate (virtctl's --insecure).
	Insecure bool
	// Async posts to nodeendpoint.UploadAsyncPath: the answer comes once
	// the body is received, and the client watches the DataVolume for the
	// result.
	Async bool
}

// Upload POSTs body (size bytes, -1 if unknown) to nodeendpoint.UploadPath
// at e (the nodeendpoint.Upload endpoint of the volume's Node, NodeOfPV)
// with the upload token as bearer token, accepting only the certificate
// whose SHA-256 is e.CertSHA256 (unless o.Insecure). It gives the
// server's answer line, or an *UploadRefusedError for a non-200 answer,
// or the transport error naming the address.
func Upload(ctx context.Context, e nodeendpoint.Endpoint, token string, body io.Reader, size int64, o UploadOptions) (string, error) {
	path := nodeendpoint.UploadPath
	if o.Async {
		path = nodeendpoint.UploadAsyncPath
	}
	return PostImage(ctx, "https://"+e.Address+path, nodeendpoint.Upload.ClientTLS(e.CertSHA256, o.Insecure), token, body, size)
}

// PostImage POSTs body (size bytes, -1 if unknown) as
// application/octet-stream to url over TLS with tlsConfig and the upload
// token as bearer token: the request of a node's upload server and of an
// upload proxy (CDI's, or converge-controller's). It gives the answer
// line, or an *UploadRefusedError for a non-200 answer, or the transport
// error naming the host.
func PostImage(ctx context.Context, url string, tlsConfig *tls.Config, token string, body io.Reader, size int64) (string, error) {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, TLSHandshakeTimeout: 10 * time.Second}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return "", err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("upload to %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(b))
	if resp.StatusCode != http.StatusOK {
		return "", &UploadRefusedError{Code: resp.StatusCode, Message: msg}
	}
	return msg, nil
}
