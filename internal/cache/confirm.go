package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hepcache/hepcache/origin"
)

// An origin that does not pin its reads to the version opened (XRootD,
// POSIX: origin.FileInfo.VersionPinned false) returns the bytes of a file
// rewritten in place as they are now, so the blocks of one copy could come
// from two versions. Before a fetched block is published (marked present,
// kept in RAM, recorded in the sidecar), the cache therefore confirms that
// the file at the origin is still the one it opened, with a stat sent after
// the block's bytes arrived: a rewrite that reached the block shows in that
// stat (another size or modification time), and the copy is then dropped
// (spoil: readers in flight fail, nothing mixed stays cached). One stat
// confirms every block that arrived before it was sent, so a file being
// fetched costs about one stat per round trip, not one per block; the
// block's readers are not held up, its publication is.
//
// What cannot be seen: a rewrite with the same size within the same second
// (XRootD reports whole seconds), as for the checks at open. An origin that
// cannot answer the stat does not hold blocks back (their bytes came from
// the file as opened; the failure is logged).

// confirmer is the identity check of an entry's origin file.
type confirmer struct {
	// mu protects upTo and running.
	mu sync.Mutex
	// upTo is when the last stat that found the file unchanged was sent:
	// blocks that arrived before are confirmed.
	upTo time.Time
	// running is the stat in flight, if any.
	running *confirmation

	// checked is closed when the whole-file check of the copy completed
	// in this session has ended (verify.go: checksum settled, copy
	// dropped, or the check postponed); made on first use. Protected by
	// mu.
	checked chan struct{}

	// delivered records what the copy's handles handed out, so that a
	// copy whose identity the whole-file checksum refutes can name whom
	// it reached (deliver.go, verify.go).
	delivered deliveries
}

// wholeChecked returns the channel closed when the whole-file check of the
// copy has ended.
func (cf *confirmer) wholeChecked() <-chan struct{} {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.checked == nil {
		cf.checked = make(chan struct{})
	}
	return cf.checked
}

// checkEnded releases the reads waiting for the whole-file check.
func (cf *confirmer) checkEnded() {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.checked == nil {
		cf.checked = make(chan struct{})
	}
	select {
	case <-cf.checked:
	default:
		close(cf.checked)
	}
}

// confirmation is one stat in flight; done is closed when err and sent
// are set.
type confirmation struct {
	sent time.Time
	done chan struct{}
	err  error
	// unknown: the origin could not be asked.
	unknown bool
}

// confirm returns once the origin's file has been found unchanged by a
// stat sent after arrived, with an error only if it changed (the entry is
// spoiled, errChanged). If the origin cannot be asked (it fails, or ctx or
// the cache's context ends: a shutdown) the block is published: its bytes
// came from the file as opened.
// The stat runs under the cache's context, not the entry's: a fetch that
// completes while the entry finishes (its clients gone) still publishes
// its block, and finish waits for it.
func (e *entry) confirm(ctx context.Context, arrived time.Time) error {
	cf := &e.ident
	for {
		cf.mu.Lock()
		if !cf.upTo.Before(arrived) {
			cf.mu.Unlock()
			return nil
		}
		c := cf.running
		if c == nil {
			c = &confirmation{sent: time.Now(), done: make(chan struct{})}
			cf.running = c
			go e.statIdentity(c)
		}
		cf.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil
		}
		if c.err != nil {
			return c.err
		}
		if c.unknown {
			return nil
		}
		// A stat sent before arrived confirms nothing for this block:
		// the loop starts the next one.
	}
}

// statIdentity runs one confirmation stat and records its outcome.
func (e *entry) statIdentity(c *confirmation) {
	ctx, cancel := context.WithTimeout(e.c.ctx, e.c.cfg.OriginTimeout)
	fi, err := e.o.Stat(ctx, e.key.Path)
	cancel()
	switch {
	case err == nil:
		if why := e.versionDiffers(fi); why != "" {
			c.err = fmt.Errorf("%s: %s: %w", e.key, why, errChanged)
			e.changedAtOrigin(c.err)
		}
	case errors.Is(err, origin.ErrNotFound):
		c.err = fmt.Errorf("%s: removed at the origin: %w", e.key, errChanged)
		e.changedAtOrigin(c.err)
	default:
		// The origin cannot say now: the bytes came from the file as
		// opened, publish them.
		c.unknown = true
		if e.c.ctx.Err() == nil {
			e.c.warn("cannot confirm the origin file is unchanged; its blocks are kept", "key", e.key.String(), "err", err)
		}
	}
	cf := &e.ident
	cf.mu.Lock()
	if c.err == nil && !c.unknown && cf.upTo.Before(c.sent) {
		cf.upTo = c.sent
	}
	cf.running = nil
	cf.mu.Unlock()
	close(c.done)
}
