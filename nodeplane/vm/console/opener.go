package console

import (
	"context"
	"io"
)

// Opener attaches to the serial console of a running libvirt domain.
// Open takes the domain name (domain.Name of the VMI) and gives the
// console's output as a reader; when the value also implements io.Writer,
// the client's input is written to it, else the input is discarded (a
// read-only console). Read gives io.EOF when the domain stops; Close
// detaches and may be called more than once. Errors name the domain.
type Opener interface {
	Open(ctx context.Context, domainName string) (io.ReadCloser, error)
}

// OpenerFunc adapts a function to Opener; the agent wraps
// nodeplane/vm/libvirt's Conn.OpenConsole, which takes no context:
//
//	console.OpenerFunc(func(_ context.Context, name string) (io.ReadCloser, error) {
//		return conn.OpenConsole(name)
//	})
type OpenerFunc func(ctx context.Context, domainName string) (io.ReadCloser, error)

// Open calls f.
func (f OpenerFunc) Open(ctx context.Context, domainName string) (io.ReadCloser, error) {
	return f(ctx, domainName)
}
