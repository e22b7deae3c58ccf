package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// Defaults of PeerLookup.
const (
	// defaultPeerLookupTimeout bounds asking the peers; a LAN peer answers
	// a lookup in a millisecond, so this only matters when one hangs.
	defaultPeerLookupTimeout = 2 * time.Second
	// defaultMaxPeers is how many peers a miss asks, in ranking order.
	defaultMaxPeers = 8
)

// PeerLookupConfig configures a PeerLookup.
type PeerLookupConfig struct {
	// Members is the cluster view. Required.
	Members Members
	// Dial opens peers' root:// endpoints. Required.
	Dial PeerDialFunc
	// MaxPeers is how many peers a miss asks at once, the first ones in
	// the file's ranking (in redirect mode the owner before a membership
	// change ranks second). Default 8. More finds more copies at the
	// expense of one lookup per peer per miss.
	MaxPeers int
	// Timeout bounds the lookup before the origin is asked. Default 2 s.
	Timeout time.Duration
	// Logger receives lookup failures. Default slog.Default().
	Logger *slog.Logger
}

// PeerStats counts peer lookups.
type PeerStats struct {
	// Hits counts misses served by a peer, Misses those no peer had.
	Hits, Misses atomic.Int64
	// Fallbacks counts peer reads that failed and went to the origin.
	Fallbacks atomic.Int64
}

// PeerLookup makes a cache miss ask the other nodes before the origin
// (seed 003's shared cache across worker nodes): Resolver wraps the
// cache's origins so that opening a file first asks up to MaxPeers peers,
// concurrently, for a complete copy (KeyPeer; peers answer only from their
// caches), and only if none has one opens it at the origin. Stat, List and
// Checksum go to the origin.
type PeerLookup struct {
	cfg   PeerLookupConfig
	stats PeerStats

	// mu protects peers.
	mu    sync.Mutex
	peers map[string]origin.Origin
}

// NewPeerLookup validates cfg and returns a PeerLookup.
func NewPeerLookup(cfg *PeerLookupConfig) (*PeerLookup, error) {
	c := *cfg
	if c.MaxPeers == 0 {
		c.MaxPeers = defaultMaxPeers
	}
	if c.Timeout == 0 {
		c.Timeout = defaultPeerLookupTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if c.Members == nil {
		errs = append(errs, errors.New("members: required"))
	}
	if c.Dial == nil {
		errs = append(errs, errors.New("peer dialer: required"))
	}
	if c.MaxPeers < 0 || c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("max peers %d, timeout %v: must not be negative", c.MaxPeers, c.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("peer lookup: %w", err)
	}
	return &PeerLookup{cfg: c, peers: map[string]origin.Origin{}}, nil
}

// Stats returns the live counters.
func (pl *PeerLookup) Stats() *PeerStats { return &pl.stats }

// Resolver wraps inner: its Origins ask the peers before opening a file.
func (pl *PeerLookup) Resolver(inner origin.Resolver) origin.Resolver {
	return origin.ResolverFunc(func(ctx context.Context, u string) (origin.Origin, error) {
		o, err := inner.Resolve(ctx, u)
		if err != nil {
			return nil, err
		}
		return &peerOrigin{Origin: o, pl: pl}, nil
	})
}

// Close closes the connections to peers.
func (pl *PeerLookup) Close() error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var errs []error
	for k, o := range pl.peers {
		errs = append(errs, o.Close())
		delete(pl.peers, k)
	}
	return errors.Join(errs...)
}

func (pl *PeerLookup) peer(ctx context.Context, n Node) (origin.Origin, error) {
	pl.mu.Lock()
	o := pl.peers[n.Root]
	pl.mu.Unlock()
	if o != nil {
		return o, nil
	}
	o, err := pl.cfg.Dial(ctx, n.Root)
	if err != nil {
		return nil, err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if prev := pl.peers[n.Root]; prev != nil {
		o.Close()
		return prev, nil
	}
	pl.peers[n.Root] = o
	return o, nil
}

// lookup asks the peers for a complete copy of (originURL, p) and returns
// the first one found, or nil.
func (pl *PeerLookup) lookup(ctx context.Context, originURL, p string) (origin.File, string) {
	v := pl.cfg.Members.View()
	var cands []Node
	for _, n := range v.Rank(originURL + "/" + p) {
		if n.Name != v.Self.Name && len(cands) < pl.cfg.MaxPeers {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return nil, ""
	}
	ctx, cancel := context.WithTimeout(ctx, pl.cfg.Timeout)
	defer cancel()
	type found struct {
		f    origin.File
		node string
	}
	results := make(chan found, len(cands))
	q := p + "?" + KeyPeer + "=1&" + KeyOrigin + "=" + url.QueryEscape(originURL)
	for _, n := range cands {
		go func() {
			o, err := pl.peer(ctx, n)
			var f origin.File
			if err == nil {
				f, err = o.Open(ctx, q)
			}
			if err != nil && !errors.Is(err, origin.ErrNotFound) && ctx.Err() == nil {
				pl.cfg.Logger.Debug("peer lookup failed", "node", n.Name, "path", p, "err", err)
			}
			results <- found{f, n.Name}
		}()
	}
	var best found
	for range cands {
		r := <-results
		switch {
		case r.f == nil:
		case best.f == nil:
			best = r
			cancel() // the others need not finish
		default:
			r.f.Close()
		}
	}
	return best.f, best.node
}

// peerOrigin is an Origin whose Open asks the peers first.
type peerOrigin struct {
	origin.Origin
	pl *PeerLookup
}

// Open asks the peers, then the origin. See origin.Origin.
func (o *peerOrigin) Open(ctx context.Context, p string) (origin.File, error) {
	if f, node := o.pl.lookup(ctx, o.String(), p); f != nil {
		o.pl.stats.Hits.Add(1)
		o.pl.cfg.Logger.Debug("miss served by a peer", "node", node, "path", p)
		return &peerFile{File: f, o: o, path: p}, nil
	}
	o.pl.stats.Misses.Add(1)
	return o.Origin.Open(ctx, p)
}

// peerFile reads a file from a peer and, if the peer fails, from the
// origin (same size required).
type peerFile struct {
	origin.File
	o    *peerOrigin
	path string

	// mu protects fallback.
	mu       sync.Mutex
	fallback origin.File
}

// switchToOrigin opens the file at the origin after the peer failed.
func (f *peerFile) switchToOrigin(ctx context.Context, cause error) (origin.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fallback != nil {
		return f.fallback, nil
	}
	f.o.pl.stats.Fallbacks.Add(1)
	f.o.pl.cfg.Logger.Warn("peer failed during a read, reading from the origin", "path", f.path, "err", cause)
	of, err := f.o.Origin.Open(ctx, f.path)
	if err != nil {
		return nil, fmt.Errorf("%s: peer failed (%w), origin: %w", f.path, cause, err)
	}
	if of.Info().Size != f.File.Info().Size {
		of.Close()
		return nil, fmt.Errorf("%s: origin has %d bytes, the peer's copy %d: %w", f.path, of.Info().Size, f.File.Info().Size, origin.ErrUnavailable)
	}
	f.fallback = of
	return of, nil
}

func (f *peerFile) current() origin.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fallback != nil {
		return f.fallback
	}
	return f.File
}

// ReadAt implements origin.File.
func (f *peerFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	cur := f.current()
	n, err := cur.ReadAt(ctx, p, off)
	if err == nil || err == io.EOF || cur != f.File || !nodeFailure(ctx, err) {
		return n, err
	}
	of, ferr := f.switchToOrigin(ctx, err)
	if ferr != nil {
		return 0, ferr
	}
	return of.ReadAt(ctx, p, off)
}

// ReadV implements origin.File.
func (f *peerFile) ReadV(ctx context.Context, segs []origin.Segment) error {
	cur := f.current()
	err := cur.ReadV(ctx, segs)
	if err == nil || cur != f.File || !nodeFailure(ctx, err) {
		return err
	}
	of, ferr := f.switchToOrigin(ctx, err)
	if ferr != nil {
		return ferr
	}
	return of.ReadV(ctx, segs)
}

// Close implements origin.File.
func (f *peerFile) Close() error {
	err := f.File.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fallback != nil {
		err = errors.Join(err, f.fallback.Close())
	}
	return err
}
