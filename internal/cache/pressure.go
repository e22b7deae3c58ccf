package cache

import (
	"time"

	"github.com/hepcache/hepcache/internal/blockstore"
	"github.com/hepcache/hepcache/internal/nodemem"
	"github.com/hepcache/hepcache/internal/units"
)

// The RAM cache takes what the node gives (cache.ram defaults to the
// node's memory less a reserve) and gives it back when the node needs it,
// as ZFS's ARC does: every half second (a tenth of a second while memory is
// short) the cache compares the memory still available to the node (its
// cgroup's limit less what the cgroup holds beyond reclaimable page
// cache, or the machine's MemAvailable) with a headroom, and reads the
// kernel's memory pressure (PSI). Short of the headroom, or with tasks
// stalled on memory, it evicts cold blocks and hands their slots' memory
// back to the kernel (madvise MADV_DONTNEED) at once, so that another
// process's allocations are met from what the cache held instead of
// setting off the OOM killer. When memory is free again the limit rises
// step by step and slots take memory again as blocks need it.

const (
	// pressureInterval and pressureFast are the watch's periods.
	pressureInterval = 500 * time.Millisecond
	pressureFast     = 100 * time.Millisecond
	// headroomMin, with a thirty-second of the node's memory if more, is
	// the memory the cache keeps available to the node.
	headroomMin = 256 << 20
	// pressureStall is the share of time (PSI some avg10, percent) tasks
	// may wait for memory before the cache gives back an eighth more.
	pressureStall = 10
)

// pressureWatch drives the block store's limit from the node's memory.
type pressureWatch struct {
	c        *Cache
	node     nodemem.Node
	limit    nodemem.Limit
	headroom int64
	// reduced: the limit is below the arena, after a hand-back.
	reduced bool
}

func (c *Cache) newPressureWatch() *pressureWatch {
	l, err := c.cfg.Node.Limit()
	if err != nil {
		c.cfg.Logger.Warn("the node's memory cannot be read: the RAM cache will not give memory back under pressure", "err", err)
		return nil
	}
	return &pressureWatch{c: c, node: c.cfg.Node, limit: l, headroom: max(headroomMin, l.Bytes/32)}
}

// pressureLoop runs the watch until the cache closes.
func (c *Cache) pressureLoop(w *pressureWatch) {
	defer c.wg.Done()
	t := time.NewTimer(pressureInterval)
	defer t.Stop()
	for {
		select {
		case <-c.shutdownCh:
			return
		case <-t.C:
		}
		next := pressureInterval
		if w.step() {
			next = pressureFast
		}
		t.Reset(next)
	}
}

// step compares the node's memory with the headroom once and moves the
// store's limit; it reports whether memory is short (watch closely).
func (w *pressureWatch) step() (short bool) {
	c, st := w.c, w.c.store
	avail, err := w.node.Available(w.limit)
	if err != nil {
		return false
	}
	stall, _ := w.node.Pressure()
	u := st.Usage()
	slot := int64(u.SlotSize)
	holding := u.Slots - u.Cold // slots with memory
	switch {
	case avail < w.headroom || stall >= pressureStall:
		give := (w.headroom - max(0, avail) + slot - 1) / slot
		if give < 0 {
			give = 0
		}
		if stall >= pressureStall {
			give += int64(holding / 8)
		}
		if give == 0 {
			return true
		}
		back := st.SetLimit(holding - int(give))
		if back > 0 {
			w.reduced = true
			c.stats.RAMHandBacks.Add(1)
			c.warn("memory pressure: RAM cache memory handed back to the node", "handed_back", units.Format(back),
				"available", units.Format(avail), "headroom", units.Format(w.headroom), "stall_pct", stall,
				"ram_limit", units.Format(int64(st.Usage().Limit)*slot))
		}
		return true
	case avail > 2*w.headroom && u.Limit < u.Slots:
		grow := int((avail - 2*w.headroom) / slot)
		grow = min(grow, max(u.Slots/8, blockstore.MinSlots))
		if grow <= 0 {
			return true
		}
		st.SetLimit(u.Limit + grow)
		if w.reduced && u.Limit+grow >= u.Slots {
			w.reduced = false
			c.cfg.Logger.Info("memory free again: RAM cache back to its full size", "ram", units.Format(int64(u.Slots)*slot))
		}
		return avail < 3*w.headroom
	}
	return avail < 2*w.headroom
}
