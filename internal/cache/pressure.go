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
// kernel's memory pressure (PSI). It evicts cold blocks and hands their
// slots' memory back to the kernel (madvise MADV_DONTNEED) at once, so that
// another process's allocations are met from what the cache held instead
// of setting off the OOM killer:
//
//   - short of the headroom, what the node is short of, whatever it costs
//     (the memory handed back shows in the next reading: the hand-back
//     follows the demand, it does not repeat itself);
//   - with tasks stalled on memory (more than pressureStall of the time
//     since the last reading, from PSI's stall counter: its ten-second
//     average decays slowly and would keep asking for seconds after a
//     stall ended), memory in proportion to the stall, so that a stall
//     through a whole stallWindow would hand back what lies above the
//     floor: the hot set (blocks read by more than one client, at most
//     half the arena), which stalls never take. Before, an eighth went every tenth
//     of a second while the average stayed high: a 1.5 s stall emptied
//     most of the RAM cache.
//
// One log line tells each episode, from the first hand-back to the node
// no longer short (for episodeQuiet), with its total. When memory is free again the limit
// rises step by step and slots take memory again as blocks need it.

const (
	// pressureInterval and pressureFast are the watch's periods.
	pressureInterval = 500 * time.Millisecond
	pressureFast     = 100 * time.Millisecond
	// headroomMin, with a thirty-second of the node's memory if more, is
	// the memory the cache keeps available to the node.
	headroomMin = 256 << 20
	// pressureStall is the share of time (percent) tasks may wait for
	// memory before the cache gives memory back for it.
	pressureStall = 10
	// stallWindow is how long tasks must stall without a break for the
	// cache to hand back all it holds above the floor (PSI's avg10
	// window).
	stallWindow = 10 * time.Second
	// episodeQuiet is how long the node must not be short for an episode
	// to end (a stall hovering about pressureStall is one episode, not a
	// line every other step); episodeReport is how long an episode runs
	// before its line is written anyway (a node short for good still
	// hears of it).
	episodeQuiet  = 10 * time.Second
	episodeReport = 5 * time.Minute
)

// pressureWatch drives the block store's limit from the node's memory.
type pressureWatch struct {
	c        *Cache
	node     nodemem.Node
	limit    nodemem.Limit
	headroom int64
	// reduced: the limit is below the arena, after a hand-back.
	reduced bool
	// now is the clock (a test seam); last and lastStall are the time and
	// PSI reading of the previous step.
	now       func() time.Time
	last      time.Time
	lastStall nodemem.Stall
	havePSI   bool
	// owed is the part of a slot a stall has asked for so far.
	owed float64
	// ep is the episode of pressure under way, or nil.
	ep *pressureEpisode
}

// pressureEpisode is one stretch of hand-backs, for its log line.
type pressureEpisode struct {
	start, lastShort time.Time
	back             int64   // bytes handed back
	minAvail         int64   // the least memory available seen
	maxStall         float64 // the highest stall share seen, percent
}

func (c *Cache) newPressureWatch() *pressureWatch {
	l, err := c.cfg.Node.Limit()
	if err != nil {
		c.cfg.Logger.Warn("the node's memory cannot be read: the RAM cache will not give memory back under pressure", "err", err)
		return nil
	}
	return &pressureWatch{c: c, node: c.cfg.Node, limit: l, headroom: max(headroomMin, l.Bytes/32), now: time.Now}
}

// pressureLoop runs the watch until the cache closes.
func (c *Cache) pressureLoop(w *pressureWatch) {
	defer c.wg.Done()
	t := time.NewTimer(pressureInterval)
	defer t.Stop()
	for {
		select {
		case <-c.shutdownCh:
			w.endEpisode("the cache closed")
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

// stallShare returns the share of time (percent) tasks stalled on memory
// since the last step, from PSI's total; and how long that was. Without
// a previous reading it is the ten-second average, over one fast period.
func (w *pressureWatch) stallShare(now time.Time) (share float64, over time.Duration) {
	s, ok := w.node.Pressure()
	if !ok {
		return 0, 0
	}
	prev, had := w.lastStall, w.havePSI
	w.lastStall, w.havePSI = s, true
	over = now.Sub(w.last)
	if !had || over <= 0 || s.Total < prev.Total {
		return s.Avg10, pressureFast
	}
	return min(100, 100*float64(s.Total-prev.Total)/float64(over)), over
}

// step compares the node's memory with the headroom once and moves the
// store's limit; it reports whether memory is short (watch closely).
func (w *pressureWatch) step() (short bool) {
	c, st := w.c, w.c.store
	now := w.now()
	stall, over := w.stallShare(now)
	w.last = now
	avail, err := w.node.Available(w.limit)
	if err != nil {
		return false
	}
	u := st.Usage()
	slot := int64(u.SlotSize)
	holding := int64(u.Slots - u.Cold) // slots with memory
	switch {
	case avail < w.headroom || stall >= pressureStall:
		var give int64
		if avail < w.headroom {
			give = (w.headroom - avail + slot - 1) / slot
		}
		if stall >= pressureStall {
			// The hot set stays: a stall is not the node short of
			// memory, and reading the hot set back costs every client.
			floor := int64(max(blockstore.MinSlots, min(st.Hot(), u.Slots/2)))
			if above := holding - give - floor; above > 0 {
				// A share of the arena above the floor, so that a stall
				// through stallWindow hands all of it back; fractions of
				// a slot add up over the steps.
				w.owed += float64(int64(u.Slots)-floor) * stall / 100 * float64(over) / float64(stallWindow)
				n := min(above, int64(w.owed))
				w.owed -= float64(n)
				give += n
			} else {
				w.owed = 0
			}
		}
		if give <= 0 {
			w.noteEpisode(0, avail, stall, now)
			return true
		}
		back := c.setRAMLimit(int(holding - give))
		if back > 0 {
			w.reduced = true
			c.stats.RAMHandBacks.Add(1)
		}
		w.noteEpisode(back, avail, stall, now)
		return true
	case avail > 2*w.headroom && u.Limit < u.Slots:
		w.quiet(now)
		grow := int((avail - 2*w.headroom) / slot)
		grow = min(grow, max(u.Slots/8, blockstore.MinSlots))
		if grow <= 0 {
			return true
		}
		c.setRAMLimit(u.Limit + grow)
		if w.reduced && u.Limit+grow >= u.Slots {
			w.reduced = false
			c.cfg.Logger.Info("memory free again: RAM cache back to its full size", "ram", units.Format(int64(u.Slots)*slot))
		}
		return avail < 3*w.headroom
	}
	w.quiet(now)
	return avail < 2*w.headroom
}

// noteEpisode adds a step under pressure that handed back back bytes to
// the episode under way (one starts with the first hand-back).
func (w *pressureWatch) noteEpisode(back, avail int64, stall float64, now time.Time) {
	if w.ep == nil {
		if back == 0 {
			return
		}
		w.ep = &pressureEpisode{start: now, minAvail: avail}
	}
	w.ep.lastShort = now
	w.ep.back += back
	w.ep.minAvail = min(w.ep.minAvail, avail)
	w.ep.maxStall = max(w.ep.maxStall, stall)
	if now.Sub(w.ep.start) >= episodeReport {
		w.endEpisode("still short after " + episodeReport.String())
	}
}

// quiet ends the episode under way once the node has not been short for
// episodeQuiet.
func (w *pressureWatch) quiet(now time.Time) {
	if w.ep != nil && now.Sub(w.ep.lastShort) >= episodeQuiet {
		w.endEpisode("")
	}
}

// endEpisode writes the line of the episode under way, if any: why it
// ends early, or "" when the node is no longer short.
func (w *pressureWatch) endEpisode(why string) {
	ep := w.ep
	if ep == nil {
		return
	}
	w.ep = nil
	u := w.c.store.Usage()
	args := []any{"handed_back", units.Format(ep.back), "took", ep.lastShort.Sub(ep.start).Round(time.Millisecond).String(),
		"least_available", units.Format(ep.minAvail), "headroom", units.Format(w.headroom), "most_stall_pct", ep.maxStall,
		"ram_limit", units.Format(int64(u.Limit) * int64(u.SlotSize))}
	if why != "" {
		args = append(args, "episode", why)
	}
	w.c.cfg.Logger.Warn("memory pressure: RAM cache memory handed back to the node", args...)
}
