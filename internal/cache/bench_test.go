package cache

import (
	"context"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/backend"
	"github.com/hepcache/hepcache/origin"
)

func benchCache(b *testing.B, size int) (*Cache, *origin.Mem) {
	m := origin.NewMem("mem://o")
	m.Put("/f", randomData(1, size), time.Now())
	c := newTestCache(b, b.TempDir(), m, func(cfg *Config) {
		cfg.BlockSize = 1 << 20
		cfg.PieceSize = 128 << 10
		cfg.Prefetch = 10
		cfg.FetchMemory, cfg.RAM = 64<<20, 128<<20
	})
	return c, m
}

func streamAll(b *testing.B, c *Cache, size int) {
	f, err := c.Open(context.Background(), backend.Request{Path: "/f"})
	if err != nil {
		b.Fatal(err)
	}
	const chunk = 8 << 20
	for off := 0; off < size; off += chunk {
		if _, err := f.Stream(context.Background(), int64(off), chunk, func(p []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	f.Close()
}

func BenchmarkStreamHot(b *testing.B) {
	const size = 64 << 20
	c, _ := benchCache(b, size)
	streamAll(b, c, size)
	waitIdle(b, c)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		streamAll(b, c, size)
	}
}

func BenchmarkStreamCold(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c, _ := benchCache(b, size)
		b.StartTimer()
		streamAll(b, c, size)
		b.StopTimer()
		waitIdle(b, c)
		c.Close()
		b.StartTimer()
	}
}
