package cache

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"maps"
	"sync"
	"time"

	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/sidecar"
	"github.com/hepcache/hepcache/origin"
)

// Digests that cannot be combined from the blocks' checksums (adler32 and
// CRC32C can: every complete file has them, verify.go) are computed from
// the cached bytes the first time a client asks for one of them (the
// Pelican client asks md5,crc32c,crc32,sha with every object) and kept in
// the sidecar: a hit never asks the origin for a digest again, and the
// answer is of the bytes the cache serves. One read of the file computes
// all of them at once, whichever was asked; concurrent asks of one file
// wait for that one read. A copy not held whole is answered by the origin
// as before.

// streamDigests are the algorithms computed together, by backend name.
var streamDigests = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "crc32": func() hash.Hash { return crc32.NewIEEE() },
}

// digestTimeout bounds one computation (a read of the whole file).
const digestTimeout = 10 * time.Minute

// digestFlights are the computations in progress, by file; the zero value
// is ready.
type digestFlights struct {
	// mu protects m.
	mu sync.Mutex
	m  map[Key]*digestFlight
}

type digestFlight struct {
	done chan struct{}
	sums map[string]string // valid after done; nil when not computed
	err  error
}

// digest returns the algo digest of the complete cached copy of k, and
// false when the cache does not hold the file whole (the caller asks the
// origin).
func (c *Cache) digest(ctx context.Context, o origin.Origin, k Key, mutable bool, algo string) (string, bool, error) {
	if _, ok := streamDigests[algo]; !ok {
		return "", false, nil
	}
	if v, ok := c.keptDigest(k, algo); ok {
		return v, true, nil
	}
	f := c.digestFlight(o, k, mutable, origin.ClientToken(ctx))
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
	if f.err != nil {
		return "", false, f.err
	}
	v, ok := f.sums[algo]
	return v, ok, nil
}

// keptDigest returns a digest kept with the complete copy of k.
func (c *Cache) keptDigest(k Key, algo string) (string, bool) {
	c.mu.Lock()
	e := c.files[k]
	c.mu.Unlock()
	if e != nil && e.initialized() {
		if !e.complete() {
			return "", false
		}
		e.syncMu.Lock()
		defer e.syncMu.Unlock()
		v, ok := e.side.Digests[algo]
		return v, ok
	}
	in := c.readSidecar(k)
	if in == nil || !in.Complete() {
		return "", false
	}
	v, ok := in.Digests[algo]
	return v, ok
}

// digestFlight joins or starts the computation of k's digests. It runs
// under the cache's context: a client giving up does not stop it.
func (c *Cache) digestFlight(o origin.Origin, k Key, mutable bool, tok string) *digestFlight {
	c.digests.mu.Lock()
	defer c.digests.mu.Unlock()
	if f := c.digests.m[k]; f != nil {
		return f
	}
	if c.digests.m == nil {
		c.digests.m = map[Key]*digestFlight{}
	}
	f := &digestFlight{done: make(chan struct{})}
	c.digests.m[k] = f
	c.goBackground(func() {
		ctx, cancel := context.WithTimeout(origin.WithClientToken(c.ctx, tok), digestTimeout)
		defer cancel()
		f.sums, f.err = c.computeDigests(ctx, o, k, mutable)
		c.digests.mu.Lock()
		delete(c.digests.m, k)
		c.digests.mu.Unlock()
		close(f.done)
	})
	return f
}

// computeDigests reads the complete copy of k block by block through the
// block store (each block read back from disk checked against its CRC32C)
// and keeps every stream digest in its sidecar. nil, nil: the cache does
// not hold the file whole.
func (c *Cache) computeDigests(ctx context.Context, o origin.Origin, k Key, mutable bool) (map[string]string, error) {
	e, err := c.acquire(ctx, o, k, mutable, true /* noFetch */)
	if err != nil {
		return nil, nil // not cached (or not readable now): the origin answers
	}
	defer c.release(e, sidecar.Access{}, false)
	if !e.completeSoon(ctx) {
		return nil, nil
	}
	e.syncMu.Lock()
	created := e.side.Created
	kept := maps.Clone(e.side.Digests)
	e.syncMu.Unlock()
	if len(kept) == len(streamDigests) {
		return kept, nil // computed by a flight that just ended
	}
	// md5, the slowest by far, runs beside the others.
	md := md5.New()
	others := map[string]hash.Hash{}
	for a, mk := range streamDigests {
		if a != "md5" {
			others[a] = mk()
		}
	}
	for b := 0; b < e.nblocks; b++ {
		blk, err := e.block(ctx, b, blockstore.Internal)
		if err != nil {
			return nil, fmt.Errorf("digests of %s: block %d: %w", k, b, err)
		}
		p := blk.Bytes()
		done := make(chan struct{})
		go func() { md.Write(p); close(done) }()
		for _, h := range others {
			h.Write(p)
		}
		<-done
		blk.Release()
	}
	sums := map[string]string{"md5": hex.EncodeToString(md.Sum(nil))}
	for a, h := range others {
		sums[a] = hex.EncodeToString(h.Sum(nil))
	}
	c.updateCopy(k, created, func(e *entry) {
		e.syncMu.Lock()
		e.side.Digests = maps.Clone(sums)
		e.sideChanged = true // written by the next group sync
		e.syncMu.Unlock()
		c.markDirty(e)
	}, func(in *sidecar.Info) bool {
		if in.Complete() {
			in.Digests = maps.Clone(sums)
		}
		return true
	})
	c.stats.DigestsComputed.Add(1)
	return sums, nil
}
