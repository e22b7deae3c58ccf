package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/internal/eventually"
)

// TestShedWhenFetchesQueue (issue 33 item 6): once the block fetches that
// clients wait for are queued beyond ShedAfter (here fetch memory for two
// blocks, both in flight to an origin that does not answer, three more
// waiting), an open of a file the cache does not hold whole is refused at
// once as overloaded, with a wait (the front ends answer 429 or kXR_wait)
// and counted; a file held whole is still served; once the queue drains,
// opens are taken again. Before, the open joined the queue without bound.
func TestShedWhenFetchesQueue(t *testing.T) {
	m, _ := memWithFile(61, testBlock)
	for i := range 6 {
		m.Put(fmt.Sprintf("/cold%d", i), randomData(uint64(62+i), testBlock), time.Now())
	}
	c := newTestCache(t, t.TempDir(), m, func(cfg *Config) { cfg.FetchMemory = 2 * testBlock })
	readAllVia(t, c, "/f") // held whole
	release := m.Gate()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i := range 5 {
		f, err := c.Open(context.Background(), backend.Request{Path: fmt.Sprintf("/cold%d", i)})
		if err != nil {
			t.Fatalf("open /cold%d before the queue filled: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			_, err := f.ReadAt(context.Background(), make([]byte, 10), 0)
			errs <- err
		}()
	}
	eventually.True(t, func() bool { return c.overloaded() }, "three fetches to queue behind the two in flight")
	_, err := c.Open(context.Background(), backend.Request{Path: "/cold5"})
	var we *backend.WaitError
	if !errors.Is(err, backend.ErrOverloaded) || !errors.As(err, &we) || we.Seconds < 1 {
		t.Fatalf("open while fetches queue: %v; want overloaded, with a wait", err)
	}
	if n := c.Stats().OpensShed.Load(); n != 1 {
		t.Errorf("opens shed: %d; want 1", n)
	}
	if got := readAllVia(t, c, "/f"); len(got) != testBlock {
		t.Fatalf("a file held whole while overloaded: %d bytes", len(got))
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a queued read: %v", err)
		}
	}
	if got := readAllVia(t, c, "/cold5"); len(got) != testBlock {
		t.Fatalf("after the queue drained: %d bytes", len(got))
	}
}
