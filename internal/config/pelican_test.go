package config

import (
	"strings"
	"testing"
)

func TestPelicanSection(t *testing.T) {
	c, err := Parse([]byte(`
[server]
http_listen = ":8443"
[cache]
dir = "/var/cache/hepcache"
[security]
tls_cert = "/etc/grid-security/hostcert.pem"
tls_key = "/etc/grid-security/hostkey.pem"
[pelican]
federation = "https://osg-htc.org"
site = "UCSD_hepcache"
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a member without origin.default: %v", err)
	}
	if got := c.PelicanKeyFile(); got != "/var/cache/hepcache/pelican/issuer.pem" {
		t.Errorf("key file %q", got)
	}
	if got := c.PelicanDataURL("cache.example.org"); got != "https://cache.example.org:8443" {
		t.Errorf("data URL %q", got)
	}
	c.Server.HTTPListen, c.Security.TLSCert = "", ""
	c.Pelican.Site, c.Pelican.DataURL = "a/b", "http://x:8443/p"
	c.Pelican.Namespaces = []string{"ospool"}
	err = c.Validate()
	for _, want := range []string{"server.http_listen", "security.tls_cert", "pelican.site", "pelican.data_url", "pelican.namespaces[0]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error lacks %s: %v", want, err)
		}
	}
	d := Default()
	d.Cache.Dir, d.Origin.Default, d.Pelican.Site = "/c", "root://o:1094", "x"
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "needs pelican.federation") {
		t.Errorf("a site without a federation: %v", err)
	}
}
