package cache

import (
	"context"
	"sort"
	"sync"
	"time"
)

// What a reader gets of a file whose origin does not pin reads to the
// version opened (POSIX, XRootD):
//
//   - In a namespace declared mutable (files there may be rewritten in
//     place), a read that got bytes from a fetch (a block not present when
//     the read began) does not end with success before the origin's file
//     has been found unchanged by a stat sent after those bytes arrived
//     (confirm.go): its last chunk waits for that stat, so a rewrite that
//     reached its bytes fails the read (an I/O error after part of the
//     data: the client's read fails) instead of handing over a mix of
//     versions with a success code. Blocks present when the read began
//     were confirmed before they were published and cost nothing more. A
//     vector read waits once, at its end. The wait is a round trip to the
//     origin per read of fresh bytes: at 150 ms, 8 cold xrdcp clients took
//     1.28-1.44x the direct read with it and 0.91x without (bench wan), so
//     files of the immutable namespaces (the default: WLCG data is written
//     once) do not wait; a rewrite there is still caught before its bytes
//     are kept (confirm.go), and the two points below hold everywhere.
//   - Once a version change is known (the entry is spoiled), every later
//     read on every handle of the entry fails.
//   - What no stat can see (a rewrite keeping the size and the
//     modification time to the second) only the whole-file checksum sees,
//     once the copy is complete (verify.go). In a mutable namespace, a read
//     that got bytes from a fetch and after which the copy is complete
//     (the last read of a client reading the file whole) also waits for
//     that comparison with the origin's checksum: a copy that fails it
//     fails the read. Without that wait the immutable namespaces, whose
//     reads end sooner (read-ahead then fetched more of the old version
//     before the rewrite, and the complete copy failed the checksum while
//     the client still read), caught rewrites that the mutable ones
//     handed over mixed with success. Every handle records what it
//     delivered; when the copy fails that checksum, each client that was
//     handed bytes of it is logged, those handed the whole file as
//     "delivered mixed", so that an operator can tell who got a file that
//     is no version of the origin's.

// needsConfirm reports whether a read of [off, end) may get bytes that
// arrive from the origin (a block not present now), which its last chunk
// must then see confirmed.
func (e *entry) needsConfirm(off, end int64) bool {
	if end <= off || !e.mutable {
		return false
	}
	bs := e.c.cfg.BlockSize
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.st == nil {
		return true
	}
	for b := int(off / bs); b <= int((end-1)/bs); b++ {
		if !e.st.has(b) {
			return true
		}
	}
	return false
}

// confirmedAtEnd wraps fn, which gets the bytes of [off, end) in order,
// so that the last of them is handed over only once confirmDelivered
// finds them of the version opened.
// fetched says the bytes are the cache's (a read through the blocks, which
// may complete the copy), not a bypass read's.
func (e *entry) confirmedAtEnd(ctx context.Context, off, end int64, fetched bool, fn func([]byte) error) func([]byte) error {
	pos := off
	var ranges [][2]int64
	if fetched {
		ranges = [][2]int64{{off, end}}
	}
	return func(p []byte) error {
		if pos+int64(len(p)) >= end {
			if err := e.confirmDelivered(ctx, ranges...); err != nil {
				return err
			}
		}
		pos += int64(len(p))
		return fn(p)
	}
}

// confirmDelivered returns once the bytes a read got from fetches so far
// are known to be of the version opened: nil, or why not (the entry is
// spoiled). An origin that pins its reads needs no stat. ranges are the
// byte ranges the read got through the copy's blocks: once their fetches
// have landed, a copy they completed is compared with the origin's
// checksum before the read ends (awaitWholeCheck).
func (e *entry) confirmDelivered(ctx context.Context, ranges ...[2]int64) error {
	e.ofMu.Lock()
	pinned := e.of != nil && e.of.Info().VersionPinned
	e.ofMu.Unlock()
	if !pinned {
		if err := e.confirm(ctx, time.Now()); err != nil {
			return err
		}
		if len(ranges) > 0 {
			if err := e.awaitWholeCheck(ctx, ranges); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.spoilErr()
}

// awaitWholeCheck waits for the fetches of the blocks under ranges to
// land; if the copy is then complete without a settled checksum, a fetch
// of this session completed it, and the read waits for the whole-file
// check that follows (verify.go). A copy complete at open is not waited
// for: no check of it runs.
func (e *entry) awaitWholeCheck(ctx context.Context, ranges [][2]int64) error {
	bs := e.c.cfg.BlockSize
	var landing []chan struct{}
	e.mu.Lock()
	for _, r := range ranges {
		for b := int(r[0] / bs); r[1] > r[0] && b <= int((r[1]-1)/bs); b++ {
			if f := e.fetches[b]; f != nil {
				landing = append(landing, f.done)
			}
		}
	}
	e.mu.Unlock()
	for _, done := range landing {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !e.complete() || e.sums.Load() != nil {
		return nil
	}
	select {
	case <-e.ident.wholeChecked():
	case <-e.ctx.Done(): // spoiled, or the cache closes
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// maxCoverageRanges bounds what a handle remembers of the ranges it
// delivered: a reader jumping about in more disjoint ranges than this is
// not recorded as having read the file whole (its delivery is still
// logged, with its byte count).
const maxCoverageRanges = 64

// coverage is the set of byte ranges a handle delivered, merged.
type coverage struct {
	// mu protects r (sorted, disjoint, not touching) and bytes.
	mu    sync.Mutex
	r     [][2]int64
	bytes int64
}

// add records [off, off+n).
func (c *coverage) add(off, n int64) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += n
	lo, hi := off, off+n
	// The ranges that touch [lo, hi) merge with it.
	i := sort.Search(len(c.r), func(i int) bool { return c.r[i][1] >= lo })
	j := i
	for j < len(c.r) && c.r[j][0] <= hi {
		lo, hi = min(lo, c.r[j][0]), max(hi, c.r[j][1])
		j++
	}
	if i == j && len(c.r) >= maxCoverageRanges {
		return
	}
	c.r = append(c.r[:i], append([][2]int64{{lo, hi}}, c.r[j:]...)...)
}

// whole reports whether [0, size) was delivered, and how many bytes were
// (re-reads counted again).
func (c *coverage) whole(size int64) (bool, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.r) == 1 && c.r[0][0] == 0 && c.r[0][1] >= size, c.bytes
}

// delivery is what one handle handed to its client.
type delivery struct {
	client, user, protocol string
	opened, closed         time.Time
	bytes                  int64
	whole                  bool
}

// deliveries records the deliveries of one copy, for the whole-file
// checksum to name whom a copy that fails it reached.
type deliveries struct {
	// mu protects done and failed.
	mu   sync.Mutex
	done []delivery
	// failed is why the copy is known bad ("" while it is not).
	failed string
}

// maxDeliveries bounds the closed deliveries a copy remembers until its
// checksum is known; the first are kept.
const maxDeliveries = 1024

// closed records h's delivery when its client closes; if the copy already
// failed its checksum, it is logged at once.
func (d *deliveries) closed(c *Cache, h *handle, now time.Time) {
	whole, n := h.cov.whole(h.e.size)
	if n == 0 {
		return
	}
	dv := delivery{client: h.req.Client, user: h.req.User, protocol: h.req.Protocol,
		opened: h.opened, closed: now, bytes: n, whole: whole}
	// A copy whose checksum is settled (computed or verified: published
	// as the file's) needs no more records.
	settled := h.e.sums.Load() != nil
	d.mu.Lock()
	failed := d.failed
	switch {
	case failed != "":
	case settled:
		d.done = nil
	case len(d.done) < maxDeliveries:
		d.done = append(d.done, dv)
	}
	d.mu.Unlock()
	if failed != "" {
		c.logDelivery(h.e.key, failed, dv)
	}
}

// fail marks the copy bad for why and logs every delivery recorded so far;
// handles still open log theirs when they close.
func (d *deliveries) fail(c *Cache, k Key, why string) {
	d.mu.Lock()
	if d.failed != "" {
		d.mu.Unlock()
		return
	}
	d.failed = why
	done := d.done
	d.done = nil
	d.mu.Unlock()
	for _, dv := range done {
		c.logDelivery(k, why, dv)
	}
}

// logDelivery logs that dv handed out bytes of k's copy, which is bad for
// why: as an error when it handed out the whole file (the client got a
// file that is no version of the origin's, with success), else as a
// warning.
func (c *Cache) logDelivery(k Key, why string, dv delivery) {
	args := []any{"key", k.String(), "client", dv.client, "user", dv.user, "protocol", dv.protocol,
		"opened", dv.opened.UTC().Format(time.RFC3339), "closed", dv.closed.UTC().Format(time.RFC3339), "bytes", dv.bytes, "why", why}
	if dv.whole {
		c.cfg.Logger.Error("file delivered mixed: a client was handed the whole file, which fails its whole-file checksum (a mix of versions of the origin's file)", args...)
		return
	}
	c.cfg.Logger.Warn("a client was handed part of a cached copy that fails its whole-file checksum (it may mix versions of the origin's file)", args...)
}
