package images

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"strings"
)

// CABundlePath is where Debian's update-ca-certificates writes the CA
// bundle, and where Go's crypto/x509 looks first on Linux.
const CABundlePath = "etc/ssl/certs/ca-certificates.crt"

// caCertificatesDir is where the ca-certificates package ships its
// certificates.
const caCertificatesDir = "usr/share/ca-certificates/"

// CABundle gives the bytes of /etc/ssl/certs/ca-certificates.crt as
// update-ca-certificates writes it on a fresh install of the
// ca-certificates package unpacked in t: every certificate the package
// ships (usr/share/ca-certificates/**/*.crt, which its postinst lists in
// /etc/ca-certificates.conf in C-locale sorted order) concatenated in that
// order, each ending with a newline (`sed -e '$a\'`). It is taken from
// the Debian package rather than the host so that the host's local CAs
// (/usr/local/share/ca-certificates) never enter an image. It fails when
// t holds no certificate or one that does not parse.
func CABundle(t *Tree) ([]byte, error) {
	var buf bytes.Buffer
	n := 0
	for _, p := range t.Paths() { // sorted bytewise, as LC_ALL=C sort
		if !strings.HasPrefix(p, caCertificatesDir) || !strings.HasSuffix(p, ".crt") {
			continue
		}
		r, err := t.Open(p)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("/%s: %w", p, err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("/%s: no PEM certificate", p)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("/%s: %w", p, err)
		}
		buf.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			buf.WriteByte('\n')
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no certificate under /%s (is the ca-certificates package unpacked?)", caCertificatesDir)
	}
	return buf.Bytes(), nil
}
