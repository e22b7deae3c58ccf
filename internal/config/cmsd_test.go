package config

import (
	"flag"
	"strings"
	"testing"
)

func TestCmsdSection(t *testing.T) {
	c, err := Parse([]byte(`
[cache]
dir = "/var/cache/hepcache"
[origin]
default = "root://origin.example:1094"
[cmsd]
manager = "redirector.example:1213"
paths = ["/store", "/data"]
site = "T2_XX_Site"
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid cmsd config rejected: %v", err)
	}
	if c.Cmsd.Manager != "redirector.example:1213" || len(c.Cmsd.Paths) != 2 || c.Cmsd.QueryTimeout <= 0 {
		t.Fatalf("parsed %+v", c.Cmsd)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.Flags(fs)
	if err := fs.Parse([]string{"--cmsd-manager", "other.example:1213"}); err != nil || c.Cmsd.Manager != "other.example:1213" {
		t.Fatalf("--cmsd-manager: %v, manager %q", err, c.Cmsd.Manager)
	}

	c.Cmsd = CmsdConfig{Manager: "no-port", Paths: []string{"store"}, Site: "a&b", QueryTimeout: -1}
	err = c.Validate()
	if err == nil {
		t.Fatal("bad cmsd config accepted")
	}
	for _, want := range []string{"cmsd.manager", "cmsd.paths[0]", "cmsd.site", "cmsd.query_timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}
