package e2e

import (
	"net"
	"testing"

	"github.com/hepcache/hepcache/internal/monitor/decode"
)

// monitorCollector decodes the monitoring datagrams sent to addr.
type monitorCollector struct {
	addr string
	*decode.Collector
}

func newMonitorCollector(t *testing.T) *monitorCollector {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	c := &monitorCollector{addr: pc.LocalAddr().String(), Collector: decode.NewCollector()}
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.Add(buf[:n])
		}
	}()
	return c
}
