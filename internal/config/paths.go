package config

import (
	"path/filepath"
	"strings"
)

// KeyPath is a file or directory of the local file system that a key
// names.
type KeyPath struct {
	Key, Path string
}

// LocalPaths lists the files and directories of this machine that the
// configuration names, each with its key: what serve writes (the cache,
// the data disks, the logs) and what it reads (certificates, keys, CAs,
// token and key files). Empty keys are left out.
func (c *Config) LocalPaths() []KeyPath {
	var out []KeyPath
	add := func(key string, paths ...string) {
		for _, p := range paths {
			if p != "" && p != "-" {
				out = append(out, KeyPath{key, p})
			}
		}
	}
	add("cache.dir", c.Cache.Dir)
	add("cache.data_dirs", c.Cache.DataDirs...)
	add("log.file", c.Log.File)
	add("log.access_log", c.Log.AccessLog)
	s := &c.Security
	add("security.tls_cert", s.TLSCert)
	add("security.tls_key", s.TLSKey)
	add("security.gsi_cert", s.GSICert)
	add("security.gsi_key", s.GSIKey)
	add("security.ca_paths", s.CAPaths...)
	add("security.vomsdir", s.VOMSDir)
	add("security.crl_dirs", s.CRLDirs...)
	add("security.gridmap", s.GridMap)
	add("security.origin_token_file", s.OriginTokenFile)
	add("security.origin_cert", s.OriginCert)
	add("security.origin_key", s.OriginKey)
	add("security.origin_ca_paths", s.OriginCAPaths...)
	for _, is := range s.Issuers {
		add("security.issuer.jwks_file", is.JWKSFile)
	}
	add("origin.s3_access_key_file", c.Origin.S3AccessKeyFile)
	add("origin.s3_secret_key_file", c.Origin.S3SecretKeyFile)
	add("cluster.secret_key_file", c.Cluster.SecretKeyFile)
	add("pelican.key_file", c.Pelican.KeyFile)
	return out
}

// Under reports whether p is dir or below it.
func Under(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// RAMNote says, when cache.ram is left to its default (ram = "0"), where
// the figure comes from and how to bound it: XCache's pfc.ram is not it
// (from-xcache does not carry it over) and a node shared with other
// services wants a bound. "" when ram is set.
func (c *Config) RAMNote() string {
	if c.Cache.RAM != 0 {
		return ""
	}
	return `cache.ram = "0" takes the node's memory less a reserve, handed back under pressure, as XCache's page cache would; ` +
		`XCache's pfc.ram bounds only its blocks in flight and is not carried over by from-xcache. ` +
		`On a node shared with other services bound it: cache.ram (e.g. ram = "8G", --ram) or the unit's MemoryMax= (systemctl edit hepcache), which the default follows`
}
