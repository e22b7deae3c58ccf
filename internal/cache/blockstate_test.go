package cache

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/bitmap"
)

// TestBlockStateScripts runs testdata/blockstate.txt against blockState.
func TestBlockStateScripts(t *testing.T) {
	f, err := os.Open("testdata/blockstate.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var s *blockState
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd, want, check := strings.Cut(line, "=>")
		f := strings.Fields(cmd)
		if f[0] != "new" && s == nil {
			t.Fatalf("line %d: no state yet", n)
		}
		got := ""
		switch f[0] {
		case "new":
			s = scriptState(t, n, f[1:])
		case "reach":
			got = ints(s.reached(atoi(t, n, f[1]), len(f) < 3 || f[2] != "nofetch"))
		case "claim":
			got = strconv.FormatBool(s.claim(atoi(t, n, f[1])))
		case "missing":
			got = ints(s.missing(atoi(t, n, f[1]), atoi(t, n, f[2]), atoi(t, n, f[3])))
		case "join":
			s.join(atoi(t, n, f[1]))
		case "pause":
			s.pause()
		case "resume":
			s.resume()
		case "abandon":
			s.abandon(atoi(t, n, f[1]))
		case "drop":
			s.drop(atoi(t, n, f[1]))
		case "finish":
			complete, next := s.finished(atoi(t, n, f[1]), f[2] == "ahead", f[3] == "ok", len(f) < 5 || f[4] != "stale")
			if complete {
				got = "complete"
			} else {
				got = "next=" + ints(next)
			}
		case "state":
			got = describe(s)
		default:
			t.Fatalf("line %d: unknown command %q", n, f[0])
		}
		if check && strings.TrimSpace(want) != got {
			t.Errorf("line %d: %s => %q, want %q", n, strings.TrimSpace(cmd), got, strings.TrimSpace(want))
		}
	}
}

func scriptState(t *testing.T, n int, args []string) *blockState {
	nb := atoi(t, n, args[0])
	kv := map[string]string{}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		kv[k] = v
	}
	present := bitmap.New(nb)
	for _, p := range strings.Split(kv["present"], ",") {
		if p != "" {
			present.Set(atoi(t, n, p))
		}
	}
	return newBlockState(present, atoi(t, n, kv["prefetch"]), atoi(t, n, kv["max"]))
}

func describe(s *blockState) string {
	var present []int
	for b := 0; b < s.present.Len(); b++ {
		if s.has(b) {
			present = append(present, b)
		}
	}
	var inflight []string
	keys := make([]int, 0, len(s.inflight))
	for b := range s.inflight {
		keys = append(keys, b)
	}
	sort.Ints(keys)
	for _, b := range keys {
		kind := "r"
		if s.inflight[b] {
			kind = "a"
		}
		inflight = append(inflight, fmt.Sprintf("%d%s", b, kind))
	}
	return fmt.Sprintf("present=%s inflight=%s ahead=%d window=%d frontier=%d",
		strings.ReplaceAll(ints(present), " ", ","), strings.Join(inflight, ","), s.ahead, s.window, s.frontier)
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " ")
}

func atoi(t *testing.T, n int, s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("line %d: %q: %v", n, s, err)
	}
	return v
}
