package xcacheconf

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// keepBase adds to t the keys of base (a hepcache.toml, such as the
// packaged /etc/hepcache/hepcache.toml the output replaces) that the
// translation does not set: the packaged metrics_listen and access_log stay.
// Tables of tables ([[security.rule]] and the like) are the translation's
// alone.
func (t *translator) keepBase(base []byte, name string) error {
	var m map[string]any
	if _, err := toml.Decode(string(base), &m); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	secs := make([]string, 0, len(m))
	for s := range m {
		secs = append(secs, s)
	}
	sort.Strings(secs)
	for _, sec := range secs {
		tbl, ok := m[sec].(map[string]any)
		if !ok {
			continue
		}
		keys := make([]string, 0, len(tbl))
		for k := range tbl {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			full := sec + "." + k
			if _, set := t.keys[full]; set {
				continue
			}
			v := tbl[k]
			if _, nested := v.(map[string]any); nested {
				continue
			}
			if _, tables := v.([]map[string]any); tables {
				continue
			}
			var b bytes.Buffer
			if err := toml.NewEncoder(&b).Encode(map[string]any{"v": v}); err != nil {
				return fmt.Errorf("%s: %s: %w", name, full, err)
			}
			val := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(b.String()), "v ="))
			t.setDerived(full, val, "kept from "+name)
		}
	}
	return nil
}
