package cache

import (
	"context"
	"fmt"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

// A directory listing is the one answer whose size a client chooses
// without bound: a prefix of 100k S3 objects, listed whole and rendered
// as one PROPFIND answer, held about 70 MB per request. Listings are
// therefore streamed where the origin and the front end can (an S3
// listing page by page, origin.ListEacher; PROPFIND and dirlist entries
// sent as they come), and at most MaxListings run at once: the others wait
// for a slot, so that concurrent listings hold at most MaxListings pages
// (or whole listings, from origins that only answer whole).

var _ backend.EachLister = (*Cache)(nil)

// listSlot waits for one of the MaxListings slots (or ctx) and returns its
// release.
func (c *Cache) listSlot(ctx context.Context, k Key) (release func(), err error) {
	c.stats.Listings.Add(1)
	select {
	case c.listings <- struct{}{}:
	default:
		c.stats.ListingsWaiting.Add(1)
		select {
		case c.listings <- struct{}{}:
			c.stats.ListingsWaiting.Add(-1)
		case <-ctx.Done():
			c.stats.ListingsWaiting.Add(-1)
			c.stats.Listings.Add(-1)
			return nil, fmt.Errorf("list %s: waiting for one of the %d listings in progress to end: %w", k, cap(c.listings), ctx.Err())
		}
	}
	return func() {
		<-c.listings
		c.stats.Listings.Add(-1)
	}, nil
}

// ListEach implements backend.EachLister: the origin's entries are handed
// to fn as its listing arrives (origin.ListEach), in one of the
// MaxListings slots.
func (c *Cache) ListEach(ctx context.Context, req backend.Request, withStat bool, fn func(origin.FileInfo) error) error {
	o, k, _, err := c.key(ctx, req)
	if err != nil {
		return err
	}
	release, err := c.listSlot(ctx, k)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OriginTimeout)
	defer cancel()
	return origin.ListEach(ctx, o, k.Path, withStat, fn)
}
