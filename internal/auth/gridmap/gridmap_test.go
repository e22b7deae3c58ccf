package gridmap

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	m, err := Parse(strings.NewReader(`# comment
"/DC=ch/DC=cern/OU=Users/CN=Alice Smith" alice
/DC=org/CN=bob bob,robert

"/DC=ch/DC=cern/OU=Users/CN=Alice Smith" other
`))
	if err != nil {
		t.Fatal(err)
	}
	if m["/DC=ch/DC=cern/OU=Users/CN=Alice Smith"] != "alice" || m["/DC=org/CN=bob"] != "bob" || len(m) != 2 {
		t.Fatalf("parsed %v", m)
	}
	for _, bad := range []string{`"/DC=x alice`, "lonely"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
