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
	if err := fs.Parse([]string{"--cmsd-manager", "a.example:1213, b.example:1213"}); err != nil || len(c.Cmsd.Managers()) != 2 || c.Cmsd.Managers()[1] != "b.example:1213" {
		t.Fatalf("--cmsd-manager: %v, managers %q", err, c.Cmsd.Managers())
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("two managers rejected: %v", err)
	}
	c.Cmsd.Manager = "a.example:1213,a.example:1213"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "cmsd.manager") {
		t.Fatalf("a manager given twice: %v", err)
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
