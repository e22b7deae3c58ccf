package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecuritySection(t *testing.T) {
	c, err := Parse([]byte(`
[cache]
dir = "/var/cache/hepcache"
[origin]
default = "root://origin.example:1094"
[security]
tls_cert = "/etc/grid-security/hostcert.pem"
tls_key = "/etc/grid-security/hostkey.pem"
require_tls = true
ca_paths = ["/etc/grid-security/certificates"]
vomsdir = "/etc/grid-security/vomsdir"
audiences = ["https://cache.example:1094"]
[[security.issuer]]
issuer = "https://cms-auth.example/"
[[security.rule]]
path = "/store"
read = ["vo:cms", "scope"]
fetch = ["fqan:/cms/Role=production"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid security config rejected: %v", err)
	}
	if len(c.Security.Rules) != 1 || c.Security.Rules[0].Fetch[0] != "fqan:/cms/Role=production" || c.Security.Issuers[0].Issuer != "https://cms-auth.example/" {
		t.Fatalf("parsed %+v", c.Security)
	}

	c.Security = SecurityConfig{TLSCert: "x", RequireAuth: true, VOMSDir: "/v", ClockSkew: -1,
		Issuers: []IssuerConfig{{Issuer: "http://plain.example"}}, Rules: []AuthzRule{{Path: "store"}}, OriginKey: "k"}
	err = c.Validate()
	if err == nil {
		t.Fatal("bad security config accepted")
	}
	for _, want := range []string{"tls_cert/tls_key", "vomsdir", "clock_skew", "audiences", "https", "rule[0].path", "rule[0].read", "origin_cert"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

// FuzzParse: any text either parses into a config or is refused; it never
// panics, and a parsed config can be validated.
func FuzzParse(f *testing.F) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "hepcache.toml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(doc)
	f.Add([]byte("[security]\nca_paths = [\"/x\"]\n[[security.rule]]\npath = \"/\"\nread = [\"none\"]\n"))
	f.Add([]byte("[cache]\nblock_size = \"1M\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		_ = c.Validate()
	})
}
