package fdbudget

import (
	"syscall"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int
		want  Budget
	}{
		{"ulimit -n 1024", 1024, Budget{Limit: 1024, Connections: 258, Waiting: 64, OpenFiles: 230, Lingering: 184, Origin: 184, Spare: 104}},
		{"20000", 20000, Budget{Limit: 20000, Connections: 5513, Waiting: 787, OpenFiles: 4500, Lingering: 3600, Origin: 3600, Spare: 2000}},
		{"systemd LimitNOFILE=1048576", 1048576, Budget{Limit: 1048576, Connections: 365260, Waiting: 1024, OpenFiles: 261632, Lingering: 16384, Origin: 209305, Spare: 194971}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Split(c.limit); got != c.want {
				t.Errorf("Split(%d) = %+v, want %+v", c.limit, got, c.want)
			}
		})
	}
	// Every part at least 1 and the parts within the limit, whatever it is.
	for limit := 1; limit <= 1<<20; limit = limit*3/2 + 1 {
		b := Split(limit)
		sum := 0
		for _, p := range b.Parts() {
			if p.N < 1 {
				t.Fatalf("Split(%d): %s is %d", limit, p.Name, p.N)
			}
			sum += p.N
		}
		if limit >= MinUseful && sum != limit {
			t.Fatalf("Split(%d): parts add up to %d", limit, sum)
		}
	}
}

// TestRaise: the soft limit ends at the hard one (Go's runtime raised it
// already; Raise raises it again after it was lowered).
func TestRaise(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	if old.Max > 512 {
		low := old
		low.Cur = 512
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
	}
	soft, hard, err := Raise()
	if err != nil || soft != hard || hard != old.Max {
		t.Fatalf("Raise: soft %d, hard %d, %v; want both %d", soft, hard, err, old.Max)
	}
}
