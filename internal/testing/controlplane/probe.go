package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// errExited is pollOK's error when exited closed first.
var errExited = errors.New("exited")

// pollOK GETs url (a loopback health or readiness endpoint; its
// certificate is not verified) every interval until it answers 200 (nil),
// timeout passes, or exited closes (nil: never). The error names url and
// the last answer or transport error; it wraps errExited when exited
// closed first.
func pollOK(url string, timeout, interval time.Duration, exited <-chan struct{}) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe of a self-signed server
	}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := ""
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return fmt.Errorf("%w before %s answered", errExited, url)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer 200 within %s (last: %s)", url, timeout, last)
		case <-time.After(interval):
		}
	}
}
