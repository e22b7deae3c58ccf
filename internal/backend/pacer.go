package backend

import "context"

// A Pacer paces a File.Stream to a client that may stop reading, so that
// a stalled client never holds memory the cache needs for others. Before
// the file pins memory for the next part of a stream (a block of the
// cache's RAM) it calls Ready, which returns once the client has taken
// what was handed over before (or ctx ends, or the client is gone); the
// stream's callback then sends what it can at once and copies the rest,
// never blocking on the client while it holds the file's bytes. The file
// calls done once it has released that memory. At most one part of a
// connection's streams is between Ready and done at a time, so a client
// that stops reading holds at most what its front end copied, never the
// cache's RAM.
//
// The front end puts its Pacer in the Stream's context (WithPacer);
// files that hold no memory of their own ignore it.
type Pacer interface {
	Ready(ctx context.Context) (done func(), err error)
}

type pacerKey struct{}

// WithPacer returns ctx carrying p for the Streams it is passed to.
func WithPacer(ctx context.Context, p Pacer) context.Context {
	return context.WithValue(ctx, pacerKey{}, p)
}

// Pace waits for ctx's Pacer (if any) to be ready for the next part of a
// stream and returns the function to call once that part's memory is
// released (a no-op without a Pacer).
func Pace(ctx context.Context) (done func(), err error) {
	p, _ := ctx.Value(pacerKey{}).(Pacer)
	if p == nil {
		return noop, nil
	}
	return p.Ready(ctx)
}

func noop() {}
