package monitor

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hepcache/hepcache/internal/monitor/decode"
)

// TestDNUserRecord: an X.509 identity must not break the 'u' record. The
// DN travels in m= and a hash stands in for the name, as XrdSecgsi's.
func TestDNUserRecord(t *testing.T) {
	const dn = "/DC=org/DC=example/CN=Jane Doe/emailAddress=jane@example.org"
	name, info := monitorName(dn)
	if !regexp.MustCompile(`^[0-9a-f]{8}\.0$`).MatchString(name) || info != dn {
		t.Fatalf("monitorName(DN) = %q, %q", name, info)
	}
	if again, _ := monitorName(dn); again != name {
		t.Fatalf("the DN hash is not stable: %q then %q", name, again)
	}
	text := fmt.Sprintf("xroot/%s.4242:sid@client.example\n&p=gsi&n=%s&h=client.example&o=&r=&g=&m=%s&R=&x=&y=&I=4", name, name, info)
	u, err := decode.ParseUser(text)
	if err != nil || u.Name != name || u.Pid != "4242" || u.Host != "client.example" || u.SID != "sid" {
		t.Fatalf("decoded %+v, %v", u, err)
	}
	for in, want := range map[string][2]string{
		"":         {"nobody", ""},
		"alice":    {"alice", ""},
		"tok-sub1": {"tok-sub1", ""},
	} {
		if n, m := monitorName(in); n != want[0] || m != want[1] {
			t.Errorf("monitorName(%q) = %q, %q; want %q, %q", in, n, m, want[0], want[1])
		}
	}
	if _, m := monitorName("a&b=c"); m != "ab=c" {
		t.Errorf("the CGI separator survives in m=: %q", m)
	}
}
