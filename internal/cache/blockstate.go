package cache

import "github.com/hepcache/hepcache/internal/bitmap"

// blockState is what the cache knows and decides about the blocks of one
// open file, without any I/O: which blocks are present, which are being
// fetched (for a reader or as read-ahead), how far readers have got (the
// frontier) and how many blocks to read ahead of them (the window). The
// entry holds it under its mutex, turns its decisions into fetches and
// reports how they ended. Every block a method returns has been marked in
// flight: the caller must start its fetch and report it with finished.
//
// Having no I/O and no goroutines, it is tested with data-driven scripts
// (blockstate_test.go).
type blockState struct {
	present *bitmap.Bitmap
	// inflight holds the blocks being fetched that readers may join, each
	// with whether it was started as read-ahead.
	inflight map[int]bool
	// ahead counts read-ahead fetches running (joinable or not).
	ahead int
	// frontier is the furthest block a reader that may fetch asked for.
	frontier int
	// window is how many read-ahead fetches may run at once, and how far
	// beyond the frontier read-ahead reaches: prefetch, widened up to
	// prefetchMax while readers catch up with read-ahead still in flight.
	// prefetch <= 0 turns read-ahead off.
	window, prefetch, prefetchMax int
	// sequential: a reader moved on from the first block it reached.
	// Until then nothing is read ahead: a probe (a 1-byte read, Pelican's
	// client asking whether a cache holds an object) fetches its block
	// only.
	sequential bool
	// paused: the file has no client (it lingers after its last close);
	// read-ahead follows readers, so none starts.
	paused bool
}

func newBlockState(present *bitmap.Bitmap, prefetch, prefetchMax int) *blockState {
	return &blockState{present: present, inflight: map[int]bool{}, frontier: -1,
		window: prefetch, prefetch: prefetch, prefetchMax: prefetchMax}
}

// has reports whether block b is present.
func (s *blockState) has(b int) bool { return s.present.Test(b) }

// complete reports whether every block is present.
func (s *blockState) complete() bool { return s.present.Full() }

// fetching reports whether b is being fetched by a fetch readers may join.
func (s *blockState) fetching(b int) bool {
	_, ok := s.inflight[b]
	return ok
}

// claim marks b in flight for a reader and returns true, unless b is
// present or already in flight.
func (s *blockState) claim(b int) bool {
	if s.has(b) || s.fetching(b) {
		return false
	}
	s.inflight[b] = false
	return true
}

// missing claims, for a reader of blocks [first, last], every block that is
// neither present nor in flight, at most max of them, and returns them: a
// large read or a vector read requests all its blocks at once.
func (s *blockState) missing(first, last, max int) []int {
	var out []int
	for b := first; b <= last && b < s.present.Len() && len(out) < max; b++ {
		if s.claim(b) {
			out = append(out, b)
		}
	}
	return out
}

// join records that a reader waits for b's fetch. A reader that catches up
// with read-ahead still in flight shows the window does not cover the
// origin's latency: it widens, as TCP widens its window.
func (s *blockState) join(b int) {
	if ahead, ok := s.inflight[b]; ok && ahead && s.window < s.prefetchMax {
		s.window = min(2*s.window, s.prefetchMax)
	}
}

// reached records that a reader got to block b and returns the read-ahead
// to start. A reader that may not start downloads (NoFetch) neither moves
// the frontier nor starts read-ahead: this is the one place that rule is
// applied, for every read path.
func (s *blockState) reached(b int, mayFetch bool) []int {
	if !mayFetch {
		return nil
	}
	if s.frontier >= 0 && b > s.frontier {
		s.sequential = true
	}
	s.frontier = max(s.frontier, b)
	return s.readAhead()
}

// pause stops read-ahead (the last client closed); resume lets it start
// again with the next reader's progress.
func (s *blockState) pause()  { s.paused = true }
func (s *blockState) resume() { s.paused = false }

// readAhead claims the missing blocks after the frontier, at most window
// blocks beyond it, while fewer than window read-ahead fetches run:
// read-ahead follows the readers and never fetches the rest of a file on
// its own (Config.CompleteAfterClose does that, on purpose).
func (s *blockState) readAhead() []int {
	if s.prefetch <= 0 || s.paused || !s.sequential {
		return nil
	}
	var out []int
	n := min(s.present.Len(), s.frontier+1+s.window)
	for b := s.frontier + 1; s.ahead < s.window && b < n; b++ {
		b = s.present.NextClear(b)
		if b < 0 || b >= n {
			break
		}
		if s.fetching(b) {
			continue
		}
		s.inflight[b] = true
		s.ahead++
		out = append(out, b)
	}
	return out
}

// nextMissing returns the first block at or after from (wrapping to the
// start) that is neither present nor in flight, or -1.
func (s *blockState) nextMissing(from int) int {
	n := s.present.Len()
	for _, r := range [2][2]int{{from, n}, {0, min(from, n)}} {
		for i := r[0]; ; i++ {
			i = s.present.NextClear(i)
			if i < 0 || i >= r[1] {
				break
			}
			if !s.fetching(i) {
				return i
			}
		}
	}
	return -1
}

// started records a fetch of b that the caller started on its own (a
// retry, completion after close); ahead says whether it counts as
// read-ahead.
func (s *blockState) started(b int, ahead bool) {
	s.inflight[b] = ahead
	if ahead {
		s.ahead++
	}
}

// abandon makes b's fetch unjoinable (it failed): the next reader claims
// b again.
func (s *blockState) abandon(b int) { delete(s.inflight, b) }

// finished records the end of a fetch of b (ahead as it was started):
// with ok the block is present. current says the fetch is still b's
// registered one (not a failed fetch a reader has replaced). It returns
// whether the file is now complete and, after a success, the read-ahead to
// start next.
func (s *blockState) finished(b int, ahead, ok, current bool) (complete bool, next []int) {
	if current {
		s.abandon(b)
	}
	if ahead {
		s.ahead--
	}
	if ok {
		s.present.Set(b)
	}
	complete = s.complete()
	if ok && !complete {
		next = s.readAhead()
	}
	return complete, next
}

// drop forgets block b (found bad on disk): it is missing again.
func (s *blockState) drop(b int) { s.present.Clear(b) }
