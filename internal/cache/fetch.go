package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/fetchwindow"
	"github.com/hepcache/hepcache/origin"
)

// errWriteFailed marks a piece that arrived but could not be written to disk.
var errWriteFailed = errors.New("cache: write to disk failed")

// fetch is the single in-flight download of one block. Its pieces are read
// from the origin concurrently; pieceCh[i] is closed when piece i is on disk
// or has failed (pieceErr tells which).
//
// A piece written to disk is read back by its readers from the page cache:
// its buffer goes back to the pool at once instead of waiting for the
// slowest reader (buffers count in the process's memory, the page cache does
// not). A piece the disk refused keeps its buffer for the readers that
// registered for it, so a write failure costs no second origin read. refs[i]
// counts the holders of bufs[i] (the fetcher and registered readers);
// whoever drops it to zero returns the buffer, and once zero it never rises
// again (hold uses CAS), so nobody can read a buffer after it went back to
// the pool.
type fetch struct {
	block    int
	off, n   int64
	prefetch bool
	pieceCh  []chan struct{}
	errs     []atomic.Pointer[error]
	bufs     []atomic.Pointer[[]byte]
	sums     []checksum.Sums // per piece, written by the piece's goroutine
	refs     []atomic.Int32
	done     chan struct{}
	err      error // valid after done is closed
	// failed holds the first piece error; a failed fetch is never joined.
	failed atomic.Pointer[error]

	// waiters counts readers that joined this fetch; guarded by entry.mu.
	waiters int
	// ticket is the fetch's place in its origin's window queue: nil if the
	// window admitted it at once, or once hurried; guarded by entry.mu.
	ticket *fetchwindow.Ticket
}

// hurryLocked makes f urgent in its origin's window queue if it is still
// waiting there as read-ahead: a reader now waits for it. Once is enough,
// so the ticket is dropped: every read calls this for each block of its
// range, and Hurry consults the cache-wide share (every origin's lock).
// MUST be called with e.mu held.
func (f *fetch) hurryLocked() {
	if f.prefetch && f.ticket != nil {
		f.ticket.Hurry()
		f.ticket = nil
	}
}

// readPiece reads n bytes at off from the origin into a pooled piece
// buffer. Where the origin supports it, the buffer is taken only when the
// bytes start arriving, so the requests queued at the origin (up to
// FetchMemory of them) hold no memory. Once ReadAtAlloc has returned, the
// origin no longer writes into the buffer (origin.AllocReader), even after
// a failure or a cancelled read, so a failed read's buffer goes back to the
// pool and a retried read (failover to another upstream) refills the one
// buffer it was given.
func (e *entry) readPiece(ctx context.Context, of origin.File, n, off int64) (*[]byte, int, error) {
	c := e.c
	var (
		mu sync.Mutex // alloc runs on the origin's goroutine
		bp *[]byte
	)
	_, k, err := origin.ReadAtAlloc(ctx, of, int(n), off, func() []byte {
		mu.Lock()
		defer mu.Unlock()
		if bp == nil {
			bp = c.pieces.Get()
		}
		return *bp
	})
	mu.Lock()
	got := bp
	mu.Unlock()
	if err != nil && err != io.EOF {
		if got != nil {
			c.pieces.Put(got)
		}
		return nil, k, err
	}
	if got == nil { // nothing arrived: an empty range at the end
		got = c.pieces.Get()
	}
	return got, k, err
}

// hold registers interest in piece i's buffer; false if it is already gone.
func (f *fetch) hold(i int) bool {
	for {
		r := f.refs[i].Load()
		if r <= 0 {
			return false
		}
		if f.refs[i].CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// unhold drops one reference to piece i's buffer, returning it to the pool
// and its bytes to the budget when it was the last.
func (e *entry) unhold(f *fetch, i int) {
	if f.refs[i].Add(-1) != 0 {
		return
	}
	if b := f.bufs[i].Swap(nil); b != nil {
		e.c.pieces.Put(b)
		e.c.budget.Release(f.pieceLen(i, e.c.cfg.PieceSize))
	}
}

func (f *fetch) pieceLen(i int, ps int64) int64 {
	return min(ps, f.n-int64(i)*ps)
}

func (f *fetch) pieceErr(i int) error {
	if p := f.errs[i].Load(); p != nil {
		return *p
	}
	return nil
}

// failPiece records err as piece i's and closes it; the first failure of a
// fetch makes it unjoinable.
func (e *entry) failPiece(f *fetch, i int, err error) {
	f.errs[i].Store(&err)
	if f.failed.CompareAndSwap(nil, &err) {
		// No new reader may join a failed fetch: the next one starts a
		// fresh fetch while this one's other pieces wind down.
		e.mu.Lock()
		if e.fetches[f.block] == f {
			delete(e.fetches, f.block)
			e.st.abandon(f.block)
		}
		e.mu.Unlock()
	}
	close(f.pieceCh[i])
}

// writePiece writes piece i of f, which arrived in bp, to disk, then wakes
// its readers. The window counts a piece until it is on disk: when the disk
// is slower than the origin, the rate it measures is the disk's and the
// bytes waiting for it stay bounded. A piece the disk refused keeps its
// buffer for the readers holding it.
func (e *entry) writePiece(f *fetch, win *fetchwindow.Window, i int, bp *[]byte, poff, pn int64, sent time.Time) {
	c := e.c
	// A finishing entry's bytes still reach the readers holding the
	// piece, not the disk.
	err := e.ctx.Err()
	if err == nil {
		_, err = e.data.WriteAt((*bp)[:pn], poff)
	}
	win.Release(pn, time.Since(sent), err == nil)
	if err != nil {
		if e.ctx.Err() == nil {
			c.stats.WriteErrors.Add(1)
			c.diskError(e.disk, err)
			c.warn("cache write failed, serving from origin", "key", e.key.String(), "off", poff, "err", err)
		}
		f.bufs[i].Store(bp) // before pieceCh closes: waiters find it
		e.failPiece(f, i, fmt.Errorf("%w: %w", errWriteFailed, err))
	} else {
		c.pieces.Put(bp)
		c.budget.Release(pn)
		close(f.pieceCh[i])
	}
	e.unhold(f, i)
}

// fetchLocked registers and starts the fetch of block b, which the
// caller has marked in flight in e.st.
// MUST be called with e.mu held.
func (e *entry) fetchLocked(b int, prefetch bool) *fetch {
	off, n := e.blockRange(b)
	ps := e.c.cfg.PieceSize
	np := int((n + ps - 1) / ps)
	f := &fetch{block: b, off: off, n: n, prefetch: prefetch,
		pieceCh: make([]chan struct{}, np), errs: make([]atomic.Pointer[error], np),
		bufs: make([]atomic.Pointer[[]byte], np), refs: make([]atomic.Int32, np),
		sums: make([]checksum.Sums, np), done: make(chan struct{})}
	for i := range f.pieceCh {
		f.pieceCh[i] = make(chan struct{})
		f.refs[i].Store(1) // the fetcher's own reference
	}
	e.fetches[b] = f
	e.fetchWG.Add(1)
	// The origin's window (its bandwidth-delay product, learnt) admits the
	// whole block; until it does, the fetch waits in the window's queue,
	// demand before read-ahead, without a goroutine: hundreds of blocks of
	// read-ahead queued behind a far origin cost a few hundred bytes each.
	win := e.c.windows.Get(e.key.Origin)
	f.ticket = win.Start(e.ctx, n, !prefetch, func(err error) { go e.runFetch(f, win, err) })
	return f
}

// runFetch downloads every piece of f, then publishes the block. win has
// admitted the block's bytes, unless werr says why not.
func (e *entry) runFetch(f *fetch, win *fetchwindow.Window, werr error) {
	defer e.fetchWG.Done()
	c := e.c
	ctx := e.ctx
	if werr != nil {
		werr = fmt.Errorf("fetch %s block %d: %w", e.key, f.block, werr)
	}
	var wg sync.WaitGroup
	var of origin.File
	oerr := werr
	if werr == nil {
		of, oerr = e.originFile(ctx)
	}
	ps := c.cfg.PieceSize
	// A block never admitted (the entry is finishing) needs no space.
	if werr == nil {
		if aerr := e.data.Allocate(f.off, f.n); aerr != nil && oerr == nil {
			// No room for the block: its pieces will fail to write and
			// their readers are served from the fetched bytes (bypass).
			// Purge may free space for the next blocks.
			c.warn("cannot allocate cache space", "key", e.key.String(), "block", f.block, "err", aerr)
			c.kickPurge()
		}
	}
	for i := range f.pieceCh {
		poff := f.off + int64(i)*ps
		pn := f.pieceLen(i, ps)
		if werr != nil {
			e.failPiece(f, i, werr)
			e.unhold(f, i)
			continue
		}
		if oerr != nil {
			win.Release(pn, 0, false)
			e.failPiece(f, i, oerr)
			e.unhold(f, i)
			continue
		}
		// The cache-wide budget, in which demand goes before read-ahead.
		if err := c.budget.Acquire(ctx, pn, f.prefetch); err != nil {
			win.Release(pn, 0, false)
			e.failPiece(f, i, fmt.Errorf("fetch %s block %d: %w", e.key, f.block, err))
			e.unhold(f, i)
			continue
		}
		wg.Add(1)
		go func(i int, poff, pn int64) {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
			sent := time.Now()
			bp, k, err := e.readPiece(rctx, of, pn, poff)
			cancel()
			if err != nil && !(err == io.EOF && int64(k) == pn) {
				win.Release(pn, time.Since(sent), false)
				if bp != nil {
					c.pieces.Put(bp)
				}
				c.budget.Release(pn)
				e.failPiece(f, i, fmt.Errorf("fetch %s %d@%d: %w", e.key, pn, poff, err))
				e.unhold(f, i)
				return
			}
			buf := (*bp)[:pn]
			f.sums[i] = checksum.Of(buf)
			c.stats.BytesFetched.Add(pn)
			if f.prefetch {
				c.stats.PrefetchBytes.Add(pn)
			}
			wg.Add(1) // the write's; this goroutine's is still held
			c.diskWrites.do(func() {
				defer wg.Done()
				e.writePiece(f, win, i, bp, poff, pn, sent)
			})
		}(i, poff, pn)
	}
	wg.Wait()
	if p := f.failed.Load(); p != nil {
		f.err = *p
		c.stats.FetchErrors.Add(1)
		if ctx.Err() == nil {
			c.warn("block fetch failed", "key", e.key.String(), "block", f.block, "err", f.err)
		}
	}

	ok := f.err == nil
	sums := checksum.Empty
	if ok {
		for _, ps := range f.sums {
			sums = checksum.Append(sums, ps)
		}
		_, n := e.blockRange(f.block)
		c.grew(e.key, n)
	}
	e.mu.Lock()
	if ok {
		e.blockSums[f.block] = sums
		e.unsynced = append(e.unsynced, f.block)
	}
	current := e.fetches[f.block] == f
	if current {
		delete(e.fetches, f.block)
	}
	complete, next := e.st.finished(f.block, f.prefetch, ok, current)
	if ok {
		e.atRest.fresh(f.block) // just written: nothing to check
	}
	e.startAheadLocked(next)
	e.mu.Unlock()
	if ok {
		c.index.checked(e.key, f.block, e.nblocks) // its bytes are the origin's
		c.markDirty(e)
		c.stats.BlocksFetched.Add(1) // after the bit: a test may wait on it
	}
	close(f.done)
	if complete {
		// Record the complete file at once rather than at the next tick,
		// then verify it in the background.
		e.sync()
		e.scheduleVerify()
	}
}
