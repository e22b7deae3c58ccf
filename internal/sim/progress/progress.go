// Package progress draws a one-line progress bar on a terminal.
//
// Producers only store a counter (an atomic, safe from any goroutine); a
// ticker goroutine redraws the line a few times a second, so a hot loop pays
// nothing for the display.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bar is a progress bar. The zero value is not usable; call New. A nil *Bar
// is a valid bar that draws nothing, so callers need no checks.
type Bar struct {
	w     io.Writer
	label string
	unit  string
	total atomic.Int64
	done  atomic.Int64
	start time.Time

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// Enabled reports whether mode ("auto", "always", "never") asks for a bar on
// f; auto means only when f is a terminal.
func Enabled(mode string, f *os.File) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// New starts a bar on w with a label; unit is "B" for bytes or "" for counts.
func New(w io.Writer, label, unit string, total int64) *Bar {
	b := &Bar{w: w, label: label, unit: unit, start: time.Now(), stop: make(chan struct{})}
	b.total.Store(total)
	b.wg.Add(1)
	go b.loop()
	return b
}

// Set records the amount done so far. Safe for concurrent use.
func (b *Bar) Set(done int64) {
	if b != nil {
		b.done.Store(done)
	}
}

// SetTotal changes the total. Safe for concurrent use.
func (b *Bar) SetTotal(total int64) {
	if b != nil {
		b.total.Store(total)
	}
}

// Done draws the final state, ends the line and stops the bar. Idempotent.
func (b *Bar) Done() {
	if b == nil {
		return
	}
	b.once.Do(func() {
		close(b.stop)
		b.wg.Wait()
		b.draw()
		fmt.Fprintln(b.w)
	})
}

func (b *Bar) loop() {
	defer b.wg.Done()
	t := time.NewTicker(150 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.draw()
		}
	}
}

func (b *Bar) draw() {
	fmt.Fprint(b.w, "\r"+Line(b.label, b.unit, b.done.Load(), b.total.Load(), time.Since(b.start)))
}

// Line renders one bar state, e.g. "replay [#####.....]  52%  1.6M/3.1M  0:02".
func Line(label, unit string, done, total int64, elapsed time.Duration) string {
	const width = 30
	frac := 0.0
	if total > 0 {
		frac = min(1, float64(done)/float64(total))
	}
	n := int(frac * width)
	return fmt.Sprintf("%-10s [%s%s] %3.0f%% %s/%s %s ", label, strings.Repeat("#", n), strings.Repeat(".", width-n),
		100*frac, human(done, unit), human(total, unit), elapsed.Truncate(100*time.Millisecond))
}

func human(v int64, unit string) string {
	f := float64(v)
	for _, p := range []string{"", "k", "M", "G", "T", "P"} {
		if f < 1000 {
			if p == "" {
				return fmt.Sprintf("%.0f%s", f, unit)
			}
			return fmt.Sprintf("%.1f%s%s", f, p, unit)
		}
		f /= 1000
	}
	return fmt.Sprintf("%.1fE%s", f, unit)
}
