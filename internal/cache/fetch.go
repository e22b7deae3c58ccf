package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// errWriteFailed marks a piece that arrived but could not be written to disk.
var errWriteFailed = errors.New("cache: write to disk failed")

// fetch is the single in-flight download of one block. Its pieces are read
// from the origin concurrently; pieceCh[i] is closed when piece i is on disk
// or has failed (pieceErr tells which).
type fetch struct {
	block    int
	off, n   int64
	prefetch bool
	pieceCh  []chan struct{}
	errs     []atomic.Pointer[error]
	done     chan struct{}
	err      error // valid after done is closed

	// waiters counts readers that joined this fetch; guarded by entry.mu.
	waiters int
}

func (f *fetch) pieceErr(i int) error {
	if p := f.errs[i].Load(); p != nil {
		return *p
	}
	return nil
}

// startFetchLocked registers and starts the fetch of block b.
// MUST be called with e.mu held.
func (e *entry) startFetchLocked(b int, prefetch bool) *fetch {
	off, n := e.blockRange(b)
	ps := e.c.cfg.PieceSize
	np := int((n + ps - 1) / ps)
	f := &fetch{block: b, off: off, n: n, prefetch: prefetch,
		pieceCh: make([]chan struct{}, np), errs: make([]atomic.Pointer[error], np), done: make(chan struct{})}
	for i := range f.pieceCh {
		f.pieceCh[i] = make(chan struct{})
	}
	e.fetches[b] = f
	if prefetch {
		e.prefetching++
	}
	e.fetchWG.Add(1)
	go e.runFetch(f)
	return f
}

// runFetch downloads every piece of f, then publishes the block.
func (e *entry) runFetch(f *fetch) {
	defer e.fetchWG.Done()
	c := e.c
	ctx := e.ctx
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	fail := func(i int, err error) {
		f.errs[i].Store(&err)
		if failed.CompareAndSwap(nil, &err) {
			// No new reader may join a failed fetch: the next one starts a
			// fresh fetch while this one's other pieces wind down.
			e.mu.Lock()
			if e.fetches[f.block] == f {
				delete(e.fetches, f.block)
			}
			e.mu.Unlock()
		}
		close(f.pieceCh[i])
	}
	of, oerr := e.originFile(ctx)
	ps := c.cfg.PieceSize
	for i := range f.pieceCh {
		if oerr != nil {
			fail(i, oerr)
			continue
		}
		poff := f.off + int64(i)*ps
		pn := min(ps, f.off+f.n-poff)
		if err := c.budget.Acquire(ctx, pn, f.prefetch); err != nil {
			fail(i, fmt.Errorf("fetch %s block %d: %w", e.key, f.block, err))
			continue
		}
		wg.Add(1)
		go func(i int, poff, pn int64) {
			defer wg.Done()
			defer c.budget.Release(pn)
			bp := c.pieces.Get().(*[]byte)
			defer c.pieces.Put(bp)
			buf := (*bp)[:pn]
			rctx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
			k, err := of.ReadAt(rctx, buf, poff)
			cancel()
			if err != nil && !(err == io.EOF && int64(k) == pn) {
				fail(i, fmt.Errorf("fetch %s %d@%d: %w", e.key, pn, poff, err))
				return
			}
			c.stats.BytesFetched.Add(pn)
			if f.prefetch {
				c.stats.PrefetchBytes.Add(pn)
			}
			if _, err := e.data.WriteAt(buf, poff); err != nil {
				c.stats.WriteErrors.Add(1)
				c.cfg.Logger.Warn("cache write failed, serving from origin", "key", e.key.String(), "off", poff, "err", err)
				fail(i, fmt.Errorf("%w: %w", errWriteFailed, err))
				return
			}
			close(f.pieceCh[i])
		}(i, poff, pn)
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		f.err = *p
		c.stats.FetchErrors.Add(1)
		if ctx.Err() == nil {
			c.cfg.Logger.Warn("block fetch failed", "key", e.key.String(), "block", f.block, "err", f.err)
		}
	}

	complete := false
	if f.err == nil {
		c.stats.BlocksFetched.Add(1)
		complete = e.blockWritten(f.block)
	}
	e.mu.Lock()
	if e.fetches[f.block] == f {
		delete(e.fetches, f.block)
	}
	if f.prefetch {
		e.prefetching--
	}
	if f.err == nil && !complete {
		e.schedulePrefetchLocked(e.frontier)
	}
	e.mu.Unlock()
	close(f.done)
	if complete {
		// Record the complete file at once rather than at the next tick.
		e.fetchWG.Add(1)
		go func() {
			defer e.fetchWG.Done()
			e.sync()
		}()
	}
}
