package source

import (
	"context"
	"errors"
	"fmt"
	"io"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
)

// localScheme is the URL scheme under which this package registers its
// in-process transport for local repositories. go-git's own "file" transport
// runs the git-upload-pack binary; this one serves the source repository with
// go-git's embedded upload-pack server instead. A private scheme name is used
// so that other users of go-git's "file" transport in the process are not
// affected.
const localScheme = "converge-local"

func init() {
	client.InstallProtocol(localScheme, localTransport{})
}

// localTransport is a transport.Transport that opens the repository at the
// endpoint path (work tree or bare) and serves it in-process.
type localTransport struct{}

func (localTransport) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	repo, err := git.PlainOpenWithOptions(ep.Path, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, fmt.Errorf("%w: no Git repository at %s", transport.ErrRepositoryNotFound, ep.Path)
		}
		return nil, fmt.Errorf("open local repository %s: %w", ep.Path, err)
	}
	sess, err := server.NewClient(fixedLoader{repo.Storer}).NewUploadPackSession(ep, auth)
	if err != nil {
		return nil, err
	}
	return &haveFilter{UploadPackSession: sess, objects: repo.Storer}, nil
}

func (localTransport) NewReceivePackSession(*transport.Endpoint, transport.AuthMethod) (transport.ReceivePackSession, error) {
	return nil, errors.New("gitops: pushing is not supported")
}

// fixedLoader is a server.Loader that always serves one storer.
type fixedLoader struct{ s storer.Storer }

func (l fixedLoader) Load(*transport.Endpoint) (storer.Storer, error) { return l.s, nil }

// haveFilter drops the client's "have" hashes that the source repository does
// not hold. A real git server ignores unknown haves, but go-git's embedded
// server fails on them, which would break incremental fetches after the
// source's history was rewritten (force push, gc).
type haveFilter struct {
	transport.UploadPackSession
	objects storer.EncodedObjectStorer
}

func (h *haveFilter) UploadPack(ctx context.Context, req *packp.UploadPackRequest) (*packp.UploadPackResponse, error) {
	known := req.Haves[:0:0]
	for _, have := range req.Haves {
		if h.objects.HasEncodedObject(have) == nil {
			known = append(known, have)
		}
	}
	req.Haves = known
	return h.UploadPackSession.UploadPack(ctx, req)
}

// Close closes the session and the source repository's storage.
func (h *haveFilter) Close() error {
	err := h.UploadPackSession.Close()
	if c, ok := h.objects.(io.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}
