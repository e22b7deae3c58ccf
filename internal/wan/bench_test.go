package wan

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// table1 holds the round-trip times of seed 000, Table 1, in ms.
var table1 = []float64{0.38, 2.8, 10.3, 20.8, 89.5, 157}

// BenchmarkRTT reports the RTT MeasureRTT sees through links configured
// with the paper's RTTs: "measured-ms" should match "configured-ms".
func BenchmarkRTT(b *testing.B) {
	for _, ms := range append([]float64{0}, table1...) {
		b.Run(fmt.Sprintf("rtt=%gms", ms), func(b *testing.B) {
			rtt := time.Duration(ms * float64(time.Millisecond))
			p := newProxy(b, "127.0.0.1:1", func(c *Config) { c.RTT = rtt })
			n := max(5, min(50, int(time.Second/max(rtt, time.Millisecond))))
			var mean, sd time.Duration
			for b.Loop() {
				var err error
				if mean, sd, err = p.MeasureRTT(context.Background(), n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(ms, "configured-ms")
			b.ReportMetric(float64(mean)/1e6, "measured-ms")
			b.ReportMetric(float64(sd)/1e6, "sd-ms")
		})
	}
}

// BenchmarkThroughput streams data one way through the proxy and reports
// MB/s, with and without a bandwidth limit and a delay. The anchor is the
// same stream over plain loopback.
func BenchmarkThroughput(b *testing.B) {
	sink := serveTCP(b, func(c *net.TCPConn) {
		io.Copy(io.Discard, c)
		c.CloseWrite()
	})
	for _, tc := range []struct {
		name   string
		direct bool
		rtt    time.Duration
		bw     int64
	}{
		{"direct", true, 0, 0},
		{"proxy", false, 0, 0},
		{"proxy-rtt=10ms", false, 10 * time.Millisecond, 0},
		{"proxy-bw=100MB/s", false, 0, 100e6},
		{"proxy-rtt=10ms-bw=100MB/s", false, 10 * time.Millisecond, 100e6},
		{"proxy-rtt=157ms-bw=100MB/s", false, 157 * time.Millisecond, 100e6},
	} {
		b.Run(tc.name, func(b *testing.B) {
			addr := sink
			if !tc.direct {
				p := newProxy(b, sink, func(c *Config) { c.RTT = tc.rtt; c.Bandwidth = tc.bw })
				addr = p.Addr().String()
			}
			size := 64 << 20
			if tc.bw > 0 && tc.rtt > 100*time.Millisecond {
				size = 128 << 20 // amortise the 1.5 RTT start-up
			}
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(size))
			for b.Loop() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				for sent := 0; sent < size; sent += len(buf) {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				c.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, c) // until the sink's EOF: all bytes arrived
				c.Close()
			}
		})
	}
}
