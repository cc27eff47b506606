package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/converge-dev/converge/internal/nodeclient"
)

// uploadThroughProxy POSTs body (size bytes) to /v1beta1/upload of the
// upload proxy at proxyURL with the token, as virtctl image-upload does;
// the proxy's certificate is checked against the system CAs unless
// insecure. A non-200 answer is a *nodeclient.UploadRefusedError with the
// proxy's (or the node's) message.
func uploadThroughProxy(ctx context.Context, proxyURL, token string, body io.Reader, size int64, insecure bool) error {
	u, err := url.Parse(proxyURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--uploadproxy-url %q: expected https://HOST[:PORT]", proxyURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1beta1/upload"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12}}} //nolint:gosec // --insecure, as virtctl's
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("upload proxy %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return &nodeclient.UploadRefusedError{Code: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	}
	return nil
}
