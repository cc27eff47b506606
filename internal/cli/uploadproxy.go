package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/converge-dev/converge/internal/nodeclient"
)

// uploadThroughProxy POSTs body (size bytes) to /v1beta1/upload of the
// upload proxy at proxyURL with the token, as virtctl image-upload does
// (nodeclient.PostImage); the proxy's certificate is checked against the
// system CAs unless insecure. A non-200 answer is a
// *nodeclient.UploadRefusedError with the proxy's (or the node's) message.
func uploadThroughProxy(ctx context.Context, proxyURL, token string, body io.Reader, size int64, insecure bool) error {
	u, err := url.Parse(proxyURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--uploadproxy-url %q: expected https://HOST[:PORT]", proxyURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1beta1/upload"
	//nolint:gosec // --insecure, as virtctl's
	_, err = nodeclient.PostImage(ctx, u.String(), &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12}, token, body, size)
	return err
}
