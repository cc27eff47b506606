package importer

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/internal/ociregistry"
	"github.com/converge-dev/converge/nodeplane/containerdisk"
)

// RegistrySource is a DataVolume's spec.source.registry, resolved by the
// node agent.
type RegistrySource struct {
	// URL is docker://HOST/REPOSITORY:TAG (or @sha256:…) or
	// oci-archive://PATH (api/datavolume ParseRegistryURL).
	URL string
	// Username and Password authenticate to the registry (basic auth,
	// the accessKeyId and secretKey of CDI's secretRef); empty:
	// anonymous.
	Username, Password string
	// CA is an optional PEM bundle trusted for the registry's HTTPS in
	// place of the system roots (CDI's certConfigMap).
	CA []byte
	// Insecure are the registries (host[:port]) reached over plain HTTP
	// or unverified HTTPS: the CDI CR's spec.config.insecureRegistries.
	Insecure []string
	// Architecture picks the image of a multi-platform index
	// (spec.source.registry.platform.architecture); default amd64. The
	// OS is linux.
	Architecture string
	// ArchiveDir is the node directory oci-archive:// paths are read in
	// (opened with os.Root: nothing outside it is reached); empty refuses
	// oci-archive sources.
	ArchiveDir string
	// Transport is the base round tripper (nil: go-containerregistry's
	// default); CA, if set, replaces its roots when it is an
	// *http.Transport.
	Transport http.RoundTripper
}

// ImportRegistry imports the disk of a containerDisk image, as CDI's
// registry data source (pkg/importer/registry-datasource.go): the image
// is pulled with go-containerregistry (internal/ociregistry: HTTPS,
// plain HTTP only for loopback and src.Insecure registries), its single
// file under /disk/ is taken (containerdisk.Disk; none, several or a
// directory: ReasonNotAnImage) and streamed, sparse, into the temporary
// file, then the steps of Import follow (qemu-img info, refusals,
// conversion to raw, growth to dst.SizeBytes, rename). Pull failures are
// retried as downloads are (opts.Retries, Backoff, Timeout per attempt):
// 404 and unknown manifests or repositories are ReasonNotFound, 401 and
// 403 ReasonHTTPError, neither retried.
func ImportRegistry(ctx context.Context, src RegistrySource, dst Target, opts Options) (Result, error) {
	u, err := datavolume.ParseRegistryURL(src.URL)
	if err != nil {
		return Result{}, newError(src.URL, ReasonInvalidInput, false, "%w", err)
	}
	tr, err := registryTransport(src)
	if err != nil {
		return Result{}, newError(src.URL, ReasonInvalidInput, false, "%w", err)
	}
	return importInto(ctx, src.URL, nil, dst, opts, func(f *spool, limit int64, rep *reporter) (download, error) {
		return withRetries(ctx, src.URL, opts, func() (download, *Error) {
			actx := ctx
			if opts.Timeout > 0 {
				var cancel context.CancelFunc
				actx, cancel = context.WithTimeout(ctx, opts.Timeout)
				defer cancel()
			}
			return pullDisk(ctx, actx, src, u, tr, f, limit, rep)
		})
	})
}

// pullDisk is one attempt: resolve the image, then copy its disk into f
// (truncated first). actx bounds the attempt, ctx is the caller's.
func pullDisk(ctx, actx context.Context, src RegistrySource, u datavolume.RegistryURL, tr http.RoundTripper, f *spool, limit int64, rep *reporter) (download, *Error) {
	classify := func(err error, during string) *Error { return classifyPull(ctx, actx, src.URL, err, during) }
	if err := f.Truncate(0); err != nil {
		return download{}, newError(src.URL, ReasonWriteFailed, true, "truncate %s: %w", f.Name(), err)
	}
	var img v1.Image
	if u.Scheme == "docker" {
		ref, err := ociregistry.ParseReference(u.Image, src.Insecure...)
		if err != nil {
			return download{}, newError(src.URL, ReasonInvalidInput, false, "%w", err)
		}
		auth := authn.Anonymous
		if src.Username != "" || src.Password != "" {
			auth = authn.FromConfig(authn.AuthConfig{Username: src.Username, Password: src.Password})
		}
		if img, err = remote.Image(ref, remote.WithContext(actx), remote.WithAuth(auth), remote.WithTransport(tr), remote.WithPlatform(platform(src))); err != nil {
			return download{}, classify(err, "pulling "+ref.Name())
		}
	} else {
		a, err := openArchive(src, u.Archive, filepath.Dir(f.Name()))
		if err != nil {
			return download{}, err
		}
		defer a.Close()
		img = a.image
	}
	var d download
	var copyErr *Error
	err := containerdisk.Disk(actx, img, "", func(hdr *tar.Header, r io.Reader) error {
		var e *Error
		d, e = copyBody(src.URL, r, hdr.Size, "", f, nil, limit, rep, classify)
		if e != nil {
			copyErr = e
			return e
		}
		return nil
	})
	var le *containerdisk.LayoutError
	switch {
	case copyErr != nil:
		return download{}, newError(src.URL, copyErr.Reason, copyErr.Retryable, "%w", copyErr.Err)
	case errors.As(err, &le):
		return download{}, newError(src.URL, ReasonNotAnImage, false, "%v: expected a containerDisk image, its disk the one file under /%s/", err, containerdisk.DiskDir)
	case err != nil:
		return download{}, classify(err, "reading the image's layers")
	}
	return d, nil
}

// platform is the platform picked from a multi-platform index.
func platform(src RegistrySource) v1.Platform {
	arch := src.Architecture
	if arch == "" {
		arch = "amd64"
	}
	return v1.Platform{OS: "linux", Architecture: arch}
}

// registryTransport gives the round tripper of src's pulls: src.Transport
// (default go-containerregistry's) with src.CA as its roots, wrapped by
// ociregistry.Transport for src.Insecure.
func registryTransport(src RegistrySource) (http.RoundTripper, error) {
	base := src.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	if len(src.CA) > 0 {
		ht, ok := base.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("CA: the transport is not an *http.Transport")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(src.CA) {
			return nil, fmt.Errorf("CA: expected PEM certificates, found none")
		}
		ht = ht.Clone()
		ht.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		base = ht
	}
	return ociregistry.Transport(base, src.Insecure), nil
}

// classifyPull turns a registry error into an *Error: the registry's
// HTTP status (go-containerregistry's transport.Error) decides, as fetch
// does for an HTTP source.
func classifyPull(ctx, actx context.Context, label string, err error, during string) *Error {
	var te *transport.Error
	switch {
	case ctx.Err() != nil:
		return newError(label, ReasonCanceled, false, "%s: %w", during, ctx.Err())
	case actx.Err() != nil:
		return newError(label, ReasonTimeout, true, "%s: no complete answer in time", during)
	case isTLSVerify(err):
		return newError(label, ReasonUnreachable, false, "%s: TLS verification failed (is the CA right, or should the CDI CR list the registry in spec.config.insecureRegistries?): %w", during, err)
	case errors.As(err, &te):
		code := te.StatusCode
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode || d.Code == transport.BlobUnknownErrorCode {
				code = http.StatusNotFound
			}
		}
		switch {
		case code == http.StatusNotFound:
			return newError(label, ReasonNotFound, false, "%s: %w", during, err)
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return newError(label, ReasonHTTPError, false, "%s: %w (is spec.source.registry.secretRef right?)", during, err)
		}
		retry := code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
		return newError(label, ReasonHTTPError, retry, "%s: %w", during, err)
	}
	return newError(label, ReasonUnreachable, true, "%s: %w", during, err)
}
