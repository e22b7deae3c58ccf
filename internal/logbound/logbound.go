// Package logbound bounds what log lines cost when clients cause them: a
// slog.Handler that cuts long values (a client's 4 KB path, an error that
// repeats it) and lets each message through at a bounded rate, counting
// what it dropped and reporting the count on the next line it lets through.
package logbound

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults; a zero Config field means the default.
const (
	// defaultMaxValue keeps a line readable and small: a path of 4096
	// bytes, quoted in an error three times, made 10 KB lines.
	defaultMaxValue = 512
	// defaultBurst and defaultRate: each message may come 20 times at
	// once, then 5 times a second. Lines an operator needs (a disk taken
	// out, a reload) come far less often than that.
	defaultBurst = 20
	defaultRate  = 5.0
	// maxKeys bounds the messages tracked (messages are constants in the
	// code, so few; past it the oldest state is dropped).
	maxKeys = 1024
)

// Config tunes a Handler.
type Config struct {
	// MaxValue bounds each string value (and error text) in bytes; longer
	// ones are cut and marked with their length. Default 512.
	MaxValue int
	// Burst and Rate bound the lines of one message (and level): Burst at
	// once, Rate a second after. Defaults 20 and 5.
	Burst int
	Rate  float64

	// now is the clock; a test seam.
	now func() time.Time
}

// Stats counts what a Handler dropped.
type Stats struct {
	// Suppressed counts the lines not written because of the rate bound.
	Suppressed atomic.Int64
}

// Handler wraps another slog.Handler. Safe for concurrent use.
type Handler struct {
	next  slog.Handler
	state *state
}

var _ slog.Handler = (*Handler)(nil)

// state is shared by a Handler and those its WithAttrs/WithGroup return.
type state struct {
	cfg   Config
	stats Stats
	// mu protects buckets.
	mu      sync.Mutex
	buckets map[key]*bucket
}

type key struct {
	level slog.Level
	msg   string
}

// bucket is one message's token bucket and the lines it dropped since the
// last one written.
type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int64
}

// New wraps next.
func New(next slog.Handler, cfg Config) *Handler {
	if cfg.MaxValue <= 0 {
		cfg.MaxValue = defaultMaxValue
	}
	if cfg.Burst <= 0 {
		cfg.Burst = defaultBurst
	}
	if cfg.Rate <= 0 {
		cfg.Rate = defaultRate
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	return &Handler{next: next, state: &state{cfg: cfg, buckets: map[key]*bucket{}}}
}

// Stats returns the live counters.
func (h *Handler) Stats() *Stats { return &h.state.stats }

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler: it drops the record beyond the rate of
// its message, else writes it with long values cut and, if lines of its
// message were dropped since the last, their count as "suppressed".
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	dropped, ok := h.state.allow(key{r.Level, r.Message})
	if !ok {
		return nil
	}
	out := slog.NewRecord(r.Time, r.Level, cut(r.Message, h.state.cfg.MaxValue), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.state.bound(a))
		return true
	})
	if dropped > 0 {
		out.AddAttrs(slog.Int64("suppressed", dropped))
	}
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	bounded := make([]slog.Attr, len(as))
	for i, a := range as {
		bounded[i] = h.state.bound(a)
	}
	return &Handler{next: h.next.WithAttrs(bounded), state: h.state}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), state: h.state}
}

// allow takes a token of k's bucket; it returns whether the line may be
// written and, if so, how many of k's lines were dropped before it.
func (s *state) allow(k key) (dropped int64, ok bool) {
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[k]
	if b == nil {
		if len(s.buckets) >= maxKeys {
			clear(s.buckets) // messages are few; a flood of distinct ones starts over
		}
		b = &bucket{tokens: float64(s.cfg.Burst), last: now}
		s.buckets[k] = b
	}
	b.tokens = min(float64(s.cfg.Burst), b.tokens+now.Sub(b.last).Seconds()*s.cfg.Rate)
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		s.stats.Suppressed.Add(1)
		return 0, false
	}
	b.tokens--
	dropped, b.suppressed = b.suppressed, 0
	return dropped, true
}

// bound cuts a's long string values, errors and stringers.
func (s *state) bound(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, cut(v.String(), s.cfg.MaxValue))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = s.bound(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, cut(x.Error(), s.cfg.MaxValue))
		case fmt.Stringer:
			return slog.String(a.Key, cut(x.String(), s.cfg.MaxValue))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// cut shortens s to at most max bytes (on a rune boundary), saying how
// long it was.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && s[i]&0xc0 == 0x80 { // not inside a UTF-8 sequence
		i--
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:i], len(s))
}
