// Effective: the config as it runs, defaults filled in and secrets
// redacted, as a JSON-ready tree for the admin API's GET /config.

package config

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// Redacted stands in for every secret Effective and Redact hide.
const Redacted = "<redacted>"

// EmbeddedSource returns the embedded config's YAML (see Embedded).
func EmbeddedSource() []byte { return bytes.Clone(embeddedYAML) }

// Effective returns c as a tree of maps, lists and scalars, as Parse would
// read it back with every default written out, and with every secret
// replaced by Redacted (see Redact).
func (c *Config) Effective() (map[string]any, error) {
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, err
	}
	Redact(tree)
	return tree, nil
}

// secretKeys are the keys whose values are secrets wherever they appear:
// auth's HS256 secret, the Redis password, an admin token.
var secretKeys = map[string]bool{"hs256_secret": true, "password": true, "token": true}

// Redact replaces, in place, every secret in tree (a config document as
// yaml.v3 decodes it into maps and lists) with Redacted: the values of
// secretKeys, and each API key's key (auth.api_keys[].key). A key that
// names a variable holding the secret (token_env) is no secret and stays.
func Redact(tree any) {
	redact(tree, "")
}

func redact(v any, parent string) {
	switch n := v.(type) {
	case map[string]any:
		for k, child := range n {
			// An empty secret is shown: it says that none is set.
			if str, isString := child.(string); isString && str != "" && (secretKeys[k] || k == "key" && parent == "api_keys") {
				n[k] = Redacted
				continue
			}
			redact(child, k)
		}
	case []any:
		for _, child := range n {
			redact(child, parent) // a list's items take the list's key
		}
	}
}
