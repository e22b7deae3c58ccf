package e2e

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hepcache/hepcache/internal/realclient"
)

// TestParallelColdReadersOverFarLink: eight clients at once read eight cold
// files through a cache whose real C++ xrootd origin is 150 ms away
// (user-space delay line), half with plain kXR_read as ROOT and uproot
// issue them, half with xrdcp's default pgread, with the default settings.
// Every client gets its file byte for byte, and the origin sends each
// byte about once (read-ahead and the fetch windows fetch nothing twice).
func TestParallelColdReadersOverFarLink(t *testing.T) {
	data := t.TempDir()
	const n, size = 8, 12 * mib
	sums := make([][32]byte, n)
	for i := range n {
		sums[i] = writeFile(t, data, fmt.Sprintf("store/far/f%d.root", i), size+i, uint64(80+i))
	}
	s := startStackRTT(t, data, 150*time.Millisecond, nil)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			env := realclient.Env()
			if i%2 == 0 {
				env = realclient.Env("XRD_CPUSEPGWRTRD=0") // plain kXR_read
			}
			r := realclient.Run(t, env, "xrdcp", "-s", "-f", s.url+fmt.Sprintf("//store/far/f%d.root", i), "-")
			if r.Err != nil {
				errs <- fmt.Errorf("client %d: %v", i, r)
				return
			}
			if sha256.Sum256(r.Stdout) != sums[i] {
				errs <- fmt.Errorf("client %d: wrong bytes", i)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := int64(n*size + n*(n-1)/2)
	got := s.originBytes()
	t.Logf("origin sent %d bytes for %d", got, total)
	if got < total || float64(got) > 1.03*float64(total)+1<<20 {
		t.Fatalf("origin sent %d bytes for %d bytes of files", got, total)
	}
}
