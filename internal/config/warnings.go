package config

import (
	"fmt"
	"net/url"

	"github.com/hepcache/hepcache/internal/upstream"
)

// Warnings lists what the configuration says that hepcache will not do,
// though it is no error: parts of origin URLs that are ignored (the path
// of a root:// origin, a query, credentials), each with the key, the URL
// (its password hidden) and why. `hepcache check` prints them and serve
// logs them at start-up, so that nothing is dropped silently.
func (c *Config) Warnings() []string {
	var out []string
	origin := func(key, raw string) {
		for _, part := range upstream.Ignored(raw) {
			out = append(out, fmt.Sprintf("%s = %q: %s is ignored", key, redact(raw), part))
		}
	}
	origin("origin.default", c.Origin.Default)
	for i, f := range c.Origin.Fallback {
		origin(fmt.Sprintf("origin.fallback[%d]", i), f)
	}
	for i, m := range c.Map {
		origin(fmt.Sprintf("map[%d].origin", i+1), m.Origin)
	}
	for i, n := range c.Namespace {
		origin(fmt.Sprintf("namespace[%d].origin", i+1), n.Origin)
	}
	return out
}

// redact hides the password of a URL with user information.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
