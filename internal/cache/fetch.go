package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/checksum"
	"github.com/hepcache/hepcache/internal/fetchwindow"
	"github.com/hepcache/hepcache/origin"
)

// errWriteFailed marks a block that arrived but could not be written to disk.
var errWriteFailed = errors.New("cache: write to disk failed")

// fetch is the single in-flight download of one block, into one slot of
// the block store, with one origin request read straight into the slot;
// pieceCh[i] is closed when piece i has arrived or failed (pieceErr tells
// which), so readers stream the block as it arrives (XCache waits for
// whole blocks). When every piece is in, the block is
// written to disk with direct I/O and handed to the RAM block cache, where
// later readers find it without reading the disk.
//
// refs counts the fetch's holders: the fetcher, and each reader that
// joined; the last one releases the slot. Readers join only while the fetch
// is registered in entry.fetches, which the fetcher leaves before it drops
// its hold, so refs never rises again from zero.
type fetch struct {
	block    int
	off, n   int64
	prefetch bool
	pieceCh  []chan struct{}
	errs     []atomic.Pointer[error]
	sums     checksum.Sums // of the block, once it is in
	// blk is the slot the pieces arrive in; set before any piece channel
	// closes without error.
	blk *blockstore.Block
	// uncached: the disk had no room for the block (known before any piece
	// arrives), so its bytes are served without being cached (bypass).
	uncached atomic.Bool
	refs     atomic.Int32
	done     chan struct{}
	err      error // valid after done is closed
	// failed holds the first piece error; a failed fetch is never joined.
	failed atomic.Pointer[error]

	// reader is the client the block is fetched for (Internal while it is
	// read ahead of any), shared whether another client waits for it too:
	// the RAM cache counts accesses by client. Guarded by entry.mu.
	reader blockstore.Reader
	shared bool
	// ticket is the fetch's place in its origin's window queue: nil if the
	// window admitted it at once, or once hurried; guarded by entry.mu.
	ticket *fetchwindow.Ticket
	// ctx scopes the fetch: the entry's, or for read-ahead its own, which
	// cancel ends when the file's last client closes before a reader
	// came for the block (read-ahead follows readers).
	ctx    context.Context
	cancel context.CancelFunc
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

// holdLocked registers reader r of f. MUST be called with e.mu held and f
// registered in e.fetches.
func (f *fetch) holdLocked(r blockstore.Reader) {
	f.refs.Add(1)
	switch {
	case f.reader == blockstore.Internal:
		f.reader = r
	case f.reader != r:
		f.shared = true
	}
}

// unhold drops one hold of f; the last releases its slot.
func (f *fetch) unhold() {
	if f.refs.Add(-1) == 0 && f.blk != nil {
		f.blk.Release()
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
	e.failFetch(f, err)
	close(f.pieceCh[i])
}

// failFetch marks f failed: its block is neither written nor published,
// also when every piece was handed to its readers before the origin's
// read failed (the bytes may be whole, but nothing vouches for them, and
// their checksums were never taken).
func (e *entry) failFetch(f *fetch, err error) {
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
}

// fetchLocked registers and starts the fetch of block b, which the
// caller has marked in flight in e.st.
// MUST be called with e.mu held.
func (e *entry) fetchLocked(b int, prefetch bool, r blockstore.Reader) *fetch {
	off, n := e.blockRange(b)
	ps := e.c.cfg.PieceSize
	np := int((n + ps - 1) / ps)
	f := &fetch{block: b, off: off, n: n, prefetch: prefetch, reader: r,
		pieceCh: make([]chan struct{}, np), errs: make([]atomic.Pointer[error], np),
		done: make(chan struct{})}
	for i := range f.pieceCh {
		f.pieceCh[i] = make(chan struct{})
	}
	f.refs.Store(1) // the fetcher's
	f.ctx, f.cancel = e.ctx, func() {}
	if prefetch {
		f.ctx, f.cancel = context.WithCancel(e.ctx)
	}
	e.fetches[b] = f
	e.fetchWG.Add(1)
	// The origin's window (its bandwidth-delay product, learnt) admits the
	// whole block; until it does, the fetch waits in the window's queue,
	// demand before read-ahead, without a goroutine and without a slot:
	// hundreds of blocks of read-ahead queued behind a far origin cost a
	// few hundred bytes each.
	win := e.c.windows.Get(e.key.Origin)
	f.ticket = win.Start(f.ctx, n, !prefetch, func(err error) { go e.runFetch(f, win, err) })
	return f
}

// start gets what f needs before its pieces can be requested: the origin
// file, a share of the fetch memory (demand before read-ahead) and a slot.
// It reports whether the budget was taken.
func (e *entry) start(ctx context.Context, f *fetch) (origin.File, bool, error) {
	of, err := e.originFile(ctx)
	if err != nil {
		return nil, false, err
	}
	c := e.c
	if err := c.budget.Acquire(ctx, f.n, f.prefetch); err != nil {
		return nil, false, fmt.Errorf("fetch %s block %d: %w", e.key, f.block, err)
	}
	blk, err := c.storeFor(f.n).Fill(ctx, int(f.n))
	if err != nil {
		return nil, true, fmt.Errorf("fetch %s block %d: %w", e.key, f.block, err)
	}
	f.blk = blk
	return of, true, nil
}

// runFetch downloads every piece of f into its slot, writes the block to
// disk and publishes it. win has admitted the block's bytes, unless werr
// says why not.
func (e *entry) runFetch(f *fetch, win *fetchwindow.Window, werr error) {
	defer e.fetchWG.Done()
	defer f.cancel()
	c := e.c
	ctx := f.ctx
	ps := c.cfg.PieceSize
	var of origin.File
	budgeted := false
	err := werr
	if werr != nil {
		err = fmt.Errorf("fetch %s block %d: %w", e.key, f.block, werr)
	} else {
		of, budgeted, err = e.start(ctx, f)
	}
	if err != nil {
		for i := range f.pieceCh {
			if werr == nil {
				win.Release(f.pieceLen(i, ps), 0, false)
			}
			e.failPiece(f, i, err)
		}
	} else {
		if c.diskFull(e.disk) {
			// The disk just refused a write for lack of space: this block
			// is served from its slot without being written (bypass)
			// while purge frees space.
			f.uncached.Store(true)
		}
		e.readPieces(ctx, f, of, win)
	}

	written := false
	sums := checksum.Empty
	if p := f.failed.Load(); p != nil {
		f.err = *p
		if ctx.Err() == nil && !errors.Is(f.err, context.Canceled) {
			c.stats.FetchErrors.Add(1)
			c.warn("block fetch failed", "key", e.key.String(), "block", f.block, "err", f.err)
		}
	} else {
		sums = f.sums
		arrived := time.Now()
		done := make(chan error, 1)
		c.diskWrites.do(func() { done <- e.writeBlock(f) })
		var cerr error
		if !of.Info().VersionPinned && !e.wholeInOneRead() {
			cerr = e.confirm(c.ctx, arrived)
		}
		if f.err = <-done; f.err == nil && cerr != nil {
			f.err = cerr // written, but of a file that changed: not published
		}
		if f.err == nil {
			written = true
			e.mu.Lock()
			r, shared := f.reader, f.shared
			e.mu.Unlock()
			c.storeFor(f.n).Publish(e.blockKey(f.block), f.blk, int(f.n), r, shared)
		}
	}
	if budgeted {
		c.budget.Release(f.n)
	}
	if written {
		c.grew(e.key, f.n)
	}
	e.mu.Lock()
	if written && sums.Len != f.n {
		panic(fmt.Sprintf("cache: block %d of %s published with checksums of %d bytes, not its %d", f.block, e.key, sums.Len, f.n))
	}
	if written {
		e.blockSums[f.block] = sums
		e.checks.Record(f.block, sums.CRC32C)
		e.unsynced = append(e.unsynced, f.block)
	}
	current := e.fetches[f.block] == f
	if current {
		delete(e.fetches, f.block)
	}
	complete, next := e.st.finished(f.block, f.prefetch, written, current)
	e.startAheadLocked(next)
	e.mu.Unlock()
	if written {
		c.markDirty(e)
		c.stats.BlocksFetched.Add(1) // after the bit: a test may wait on it
	}
	close(f.done)
	f.unhold()
	if complete {
		// Record the complete file soon rather than at the next tick,
		// then verify it in the background.
		c.kickSync()
		e.scheduleVerify()
	}
}

// wholeInOneRead says whether the file's bytes all come from one origin
// read: a file of one block in a namespace not declared mutable. Its copy
// is then the snapshot a client reading it directly would get, and the
// checks that keep the blocks of several reads of one version (a stat
// confirming each block, the origin's whole-file checksum) add nothing
// but origin round trips: a small miss costs its open and its read.
func (e *entry) wholeInOneRead() bool { return e.nblocks == 1 && !e.mutable }

// readPieces reads f's block from the origin into its slot with one
// request; each piece is handed to its readers as soon as the origin has
// delivered it (origin.ProgressReader), so a reader waits for at most a
// piece beyond what it asked for, not for the block.
func (e *entry) readPieces(ctx context.Context, f *fetch, of origin.File, win *fetchwindow.Window) {
	c := e.c
	ps := c.cfg.PieceSize
	buf := f.blk.Buf()[:f.n]
	next := 0 // the first piece not yet handed over; owned by progress
	progress := func(filled int) {
		for next < len(f.pieceCh) && int64(filled) >= min(int64(next+1)*ps, f.n) {
			// Counted before a reader can have it: a reader done with
			// the file finds its bytes in the counters.
			k := min(int64(next+1)*ps, f.n) - int64(next)*ps
			c.stats.BytesFetched.Add(k)
			if f.prefetch {
				c.stats.PrefetchBytes.Add(k)
			}
			close(f.pieceCh[next])
			next++
		}
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
	sent := time.Now()
	// The origin writes into the slot only until ReadAtProgress returns,
	// also when it fails or ctx ends (origin.File), and calls progress
	// only until then.
	k, err := origin.ReadAtProgress(rctx, of, buf, f.off, progress)
	cancel()
	if err == io.EOF && int64(k) == f.n {
		err = nil
	}
	win.Release(f.n, time.Since(sent), err == nil)
	if err != nil {
		err = fmt.Errorf("fetch %s %d@%d: %w", e.key, f.n, f.off, err)
		if errors.Is(err, origin.ErrChanged) {
			// The version the copy holds is gone at the origin: drop the
			// copy now, not at the next open.
			e.changedAtOrigin(err)
		}
		for i := next; i < len(f.pieceCh); i++ {
			e.failPiece(f, i, err)
		}
		e.failFetch(f, err)
		return
	}
	progress(int(f.n)) // an origin that under-reported (k == n)
	f.sums = checksum.Of(buf)
}

// writeBlock writes f's block from its slot to the data file, also when
// the entry is finishing (its readers may have had every byte and closed):
// finish waits for it before the final sync.
func (e *entry) writeBlock(f *fetch) error {
	c := e.c
	if f.uncached.Load() {
		return fmt.Errorf("%w: the disk is full", errWriteFailed)
	}
	err := e.data.WriteBlock(f.blk.Buf(), f.off, int(f.n))
	if noSpace(err) && e.ctx.Err() == nil {
		// The disk filled before the purge's usage check noticed: purge
		// now and try once more, rather than leave the block uncached.
		if files, _ := c.Purge(); files > 0 {
			err = e.data.WriteBlock(f.blk.Buf(), f.off, int(f.n))
		}
	}
	if err != nil {
		// Counted also when the entry is finishing: the write does not
		// depend on its readers, so its failure is the disk's.
		c.stats.WriteErrors.Add(1)
		c.diskError(e.disk, err)
		c.noteWriteError(e.disk, err)
		c.warn("cache write failed, the block stays uncached", "key", e.key.String(), "off", f.off, "err", err)
		return fmt.Errorf("%w: %w", errWriteFailed, err)
	}
	if e.data.Direct() {
		c.stats.DirectWrites.Add(1)
	} else {
		c.stats.BufferedWrites.Add(1)
	}
	return nil
}

// streamFromFetch delivers [pos, end) of a block being fetched from its
// slot, piece by piece as pieces land. end is within the block. The caller
// holds f, and the hold is dropped here.
func (e *entry) streamFromFetch(ctx context.Context, h *handle, f *fetch, pos, end int64, out func([]byte) error) (done int64, err error) {
	defer f.unhold()
	held := f.landed() // in RAM: served as from a cached block, a hit
	ps := e.c.cfg.PieceSize
	for pos < end {
		p := int((pos - f.off) / ps)
		select {
		case <-f.pieceCh[p]:
		case <-ctx.Done():
			return done, ctx.Err()
		}
		if perr := f.pieceErr(p); perr != nil {
			return done, &retryErr{cause: perr}
		}
		// Hand over every piece already in, not one at a time.
		pend := min(end, f.off+int64(p+1)*ps)
		for q := p + 1; pend < end && landed(f, q); q++ {
			pend = min(end, f.off+int64(q+1)*ps)
		}
		if err := out(f.blk.Buf()[pos-f.off : pend-f.off]); err != nil {
			return done, err
		}
		k := pend - pos
		done += k
		switch {
		case f.uncached.Load():
			h.bypassed.Add(k)
			e.c.stats.BytesBypassed.Add(k)
		case held:
			h.hit.Add(k)
			e.c.stats.BytesHit.Add(k)
		default:
			h.missed.Add(k)
			e.c.stats.BytesMissed.Add(k)
		}
		pos = pend
	}
	return done, nil
}

// landed reports whether every piece of f has arrived without error: the
// block is in RAM on its way to the disk.
func (f *fetch) landed() bool {
	for q := range f.pieceCh {
		if !landed(f, q) {
			return false
		}
	}
	return true
}

// landed reports whether piece q of f has arrived without error.
func landed(f *fetch, q int) bool {
	select {
	case <-f.pieceCh[q]:
		return f.pieceErr(q) == nil
	default:
		return false
	}
}
