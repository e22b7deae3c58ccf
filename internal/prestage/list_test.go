package prestage

import (
	"errors"
	"strings"
	"testing"

	"github.com/hepcache/hepcache/internal/backend"
)

func TestParseList(t *testing.T) {
	reqs, err := ParseList("# inputs\n/store/a.root\n\n  //store//b.root?authz=x  \nroot://o.example:1094//store/c.root\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Request{{Path: "/store/a.root"}, {Path: "/store/b.root"}, {Origin: "root://o.example:1094", Path: "/store/c.root"}}
	if len(reqs) != len(want) {
		t.Fatalf("got %+v", reqs)
	}
	for i := range want {
		if reqs[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, reqs[i], want[i])
		}
	}
	for _, bad := range []string{"", "# only a comment\n", "store/a", "/store/../../etc/passwd", "root://", "/", "root:///x"} {
		_, err := ParseList(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
		}
		if strings.Contains(bad, "/") && bad != "" && !strings.HasPrefix(bad, "#") && !errors.Is(err, backend.ErrInvalidPath) {
			t.Errorf("%q: %v, want ErrInvalidPath", bad, err)
		}
	}
	if _, err := ParseList("/a\nrelative\n"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error without the line: %v", err)
	}
}
