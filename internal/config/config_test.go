package config

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDocumentedFileIsTheDefaults keeps docs/hepcache.toml honest: it must
// list every key, each with its default value.
func TestDocumentedFileIsTheDefaults(t *testing.T) {
	doc := filepath.Join("..", "..", "docs", "hepcache.toml")
	c, err := Load(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, withEmptyLists(Default())) {
		t.Fatalf("documented config differs from the defaults:\n%+v\n%+v", c, Default())
	}
	text, _ := os.ReadFile(doc)
	for _, key := range tomlKeys(reflect.TypeOf(Config{}), "") {
		section, name, _ := strings.Cut(key, ".")
		if !strings.Contains(string(text), "["+section+"]") || !strings.Contains(string(text), "\n"+name+" = ") {
			t.Errorf("key %s is not documented in %s", key, doc)
		}
	}
}

func withEmptyLists(c *Config) *Config {
	c.Origin.ForwardAllow = []string{}
	c.Origin.Fallback = []string{}
	c.Cluster.Join = []string{}
	c.Security.CAPaths, c.Security.VOMSTargets, c.Security.Audiences, c.Security.OriginCAPaths, c.Security.AllowHosts, c.Security.CRLDirs = []string{}, []string{}, []string{}, []string{}, []string{}, []string{}
	return c
}

func tomlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("toml")
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			continue // [[tables]] are documented as examples
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, tomlKeys(f.Type, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

func TestValidateNamesKeyValueAndAllowed(t *testing.T) {
	c := Default()
	c.Cache.Dir = "/tmp/x"
	c.Origin.Default = "root://o:1094"
	if err := c.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	cases := []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"no dir", func(c *Config) { c.Cache.Dir = "" }, "cache.dir"},
		{"listen", func(c *Config) { c.Server.Listen = "1094" }, `server.listen = "1094": want host:port`},
		{"block", func(c *Config) { c.Cache.BlockSize = 1000 }, "cache.block_size = 1000"},
		{"prefetch", func(c *Config) { c.Cache.Prefetch = -2 }, "cache.prefetch = -2: 0 (off) to 1024"},
		{"no origin", func(c *Config) { c.Origin.Default = "" }, "origin.default"},
		{"level", func(c *Config) { c.Log.Level = "loud" }, `log.level = "loud"`},
		{"watermarks order", func(c *Config) { c.Space.Watermarks = "0.95,0.90" }, "low must be below high"},
		{"watermarks mixed", func(c *Config) { c.Space.Watermarks = "0.9,500G" }, "both as fractions or both as sizes"},
		{"namespace", func(c *Config) { c.Namespace = []NamespaceRule{{Prefix: "/a", Action: "drop"}} }, `namespace[1].action = "drop"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Cache.Dir = "/tmp/x"
			c.Origin.Default = "root://o:1094"
			tc.mut(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "c.toml")
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	if _, err := Load(write("[cache]\nblok_size = \"1M\"\n")); err == nil || !strings.Contains(err.Error(), "cache.blok_size") {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := Load(write("[cache]\nblock_size = \"1X\"\n")); err == nil || !strings.Contains(err.Error(), "not a size") {
		t.Fatalf("bad size: %v", err)
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	c := Default()
	c.Cache.Prefetch = 3
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Flags(fs)
	if err := fs.Parse([]string{"--prefetch", "0", "--forward-allow", "a.example, .cern.ch", "--block-size", "4M"}); err != nil {
		t.Fatal(err)
	}
	if c.Cache.Prefetch != 0 || c.Cache.BlockSize != 4<<20 || !reflect.DeepEqual(c.Origin.ForwardAllow, []string{"a.example", ".cern.ch"}) {
		t.Fatalf("flags not applied: %+v", c)
	}
}

func TestSize(t *testing.T) {
	for in, want := range map[string]Size{"1M": 1 << 20, "128K": 128 << 10, "2T": 2 << 40, "500G": 500 << 30, "1024": 1024, "1MiB": 1 << 20, "1.5G": 3 << 29} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q)=%d,%v want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1M", "1Q"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if s := Size(1 << 20).String(); s != "1M" {
		t.Errorf("String=%q", s)
	}
}

func TestClusterValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string // substring of the error, "" for valid
	}{
		{"off is not checked", func(c *Config) { c.Cluster.Mode = "bogus" }, ""},
		{"ok", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.Join = []string{"a:7946"} }, ""},
		{"bad mode", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.Mode = "bogus" }, "cluster.mode"},
		{"bad role", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.Role = "boss" }, "cluster.role"},
		{"local redirector", func(c *Config) {
			c.Cluster.Enabled, c.Cluster.Role, c.Cluster.Mode = true, "redirector", "local"
		}, "cluster.mode"},
		{"redirector still needs a cache dir (lock, admin socket)", func(c *Config) {
			c.Cluster.Enabled, c.Cluster.Role, c.Cache.Dir = true, "redirector", ""
		}, "cache.dir"},
		{"bad seed", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.Join = []string{"nohost"} }, "gossip address"},
		{"bad http", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.AdvertiseHTTP = "host:80" }, "cluster.advertise_http"},
		{"bad weight", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.Weight = 0 }, "cluster.weight"},
		{"missing key file", func(c *Config) { c.Cluster.Enabled = true; c.Cluster.SecretKeyFile = "/nonexistent" }, "secret_key_file"},
		{"fallback needs default", func(c *Config) {
			c.Origin.Default, c.Origin.ForwardAllow, c.Origin.Fallback = "", []string{"a"}, []string{"root://b:1094"}
		}, "origin.fallback"},
		{"bad hops", func(c *Config) { c.Origin.MaxHops = 0 }, "origin.max_hops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Cache.Dir, c.Origin.Default = "/tmp/x", "root://o:1094"
			tc.mut(c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	c := Default()
	c.Server.Listen, c.Server.HTTPListen = ":1094", "127.0.0.1:8080"
	if got := c.HTTPAdvertise(); got != "http://127.0.0.1:8080" {
		t.Errorf("HTTPAdvertise() = %q", got)
	}
	if h, _ := os.Hostname(); c.RootAdvertise() != h+":1094" {
		t.Errorf("RootAdvertise() = %q", c.RootAdvertise())
	}
}

func TestS3Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string // substring of the error, "" for valid
	}{
		{"ok", func(c *Config) {
			c.Origin.Default, c.Origin.S3Endpoint, c.Origin.S3Addressing = "s3://bucket/prefix", "http://127.0.0.1:7070", "path"
			c.Origin.S3AccessKeyFile, c.Origin.S3SecretKeyFile = "/a", "/s"
		}, ""},
		{"namespace origin", func(c *Config) {
			c.Namespace = []NamespaceRule{{Prefix: "/store/lake/", Origin: "s3://lake/cms"}}
		}, ""},
		{"namespace origin with a pattern", func(c *Config) {
			c.Namespace = []NamespaceRule{{Pattern: "/store/*/x", Origin: "s3://lake/cms"}}
		}, "namespace[1].origin"},
		{"bad namespace origin", func(c *Config) {
			c.Namespace = []NamespaceRule{{Prefix: "/x/", Origin: "s3://b"}}
		}, "namespace[1].origin"},
		{"bad addressing", func(c *Config) { c.Origin.S3Addressing = "dns" }, "origin.s3_addressing"},
		{"one key file", func(c *Config) { c.Origin.S3AccessKeyFile = "/a" }, "origin.s3_access_key_file"},
		{"anonymous and key files", func(c *Config) {
			c.Origin.S3Anonymous, c.Origin.S3AccessKeyFile, c.Origin.S3SecretKeyFile = true, "/a", "/s"
		}, "origin.s3_anonymous"},
		{"endpoint with a path", func(c *Config) { c.Origin.S3Endpoint = "https://rgw.example/bucket" }, "origin.s3_endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Cache.Dir, c.Origin.Default = "/tmp/x", "root://o:1094"
			tc.mut(c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	c := Default()
	c.Origin.Default = "s3://a/b"
	c.Namespace = []NamespaceRule{{Prefix: "/x", Origin: "S3://c"}, {Prefix: "/y", Origin: "root://h"}}
	if got := c.S3Origins(); !reflect.DeepEqual(got, []string{"s3://a/b", "S3://c"}) {
		t.Errorf("S3Origins() = %q", got)
	}
}
