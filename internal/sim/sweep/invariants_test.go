//go:build invariants

package sweep

import (
	"context"
	"testing"

	"github.com/hepcache/hepcache/internal/sim/gen"
	"github.com/hepcache/hepcache/internal/sim/policy"
	"github.com/hepcache/hepcache/internal/sim/replay"
)

// TestCurveEqualsLRUReplaysCMS checks exactness on a CMS-shaped trace of
// 300 000 accesses at 40 capacities, every replay field included.
func TestCurveEqualsLRUReplaysCMS(t *testing.T) {
	tr, err := gen.Generate(gen.Config{Seed: 11, Accesses: 300000, Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCurve(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, capa := range logSpace(c.MinCapacity(), c.Footprint(), 40) {
		res, err := replay.Run(context.Background(), tr, replay.Config{Policy: policy.Config{Name: "lru", Capacity: capa}})
		if err != nil {
			t.Fatal(err)
		}
		p := c.At(capa)
		if p.Hits != res.Hits || p.BytesHit != res.BytesHit || p.BytesIn != res.BytesIn ||
			p.FilesCreated != res.FilesCreated || p.FilesDeleted != res.FilesDeleted {
			t.Fatalf("capacity %d: sweep %+v, replay hits %d hit bytes %d in %d created %d deleted %d",
				capa, p, res.Hits, res.BytesHit, res.BytesIn, res.FilesCreated, res.FilesDeleted)
		}
	}
}
