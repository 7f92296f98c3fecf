// The YAML form of Node, and the unit types the config shares with filters.

package config

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/pool/units"
)

// Duration and ByteSize are defined in package units, which filter
// packages share; see there.
type (
	Duration = units.Duration
	ByteSize = units.ByteSize
)

// nodeFields is Node's mapping form; it has no methods, so decoding into it
// does not recurse into Node.UnmarshalYAML.
type nodeFields struct {
	Addr   string `yaml:"addr"`
	Weight int    `yaml:"weight"`
}

// UnmarshalYAML implements yaml.Unmarshaler for both node forms. Unknown
// keys are rejected here because the decoder's KnownFields setting does not
// reach inside custom unmarshalers.
func (nd *Node) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*nd = Node{Addr: n.Value}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if key := n.Content[i].Value; key != "addr" && key != "weight" {
				return fmt.Errorf("unknown field %q (want addr and weight)", key)
			}
		}
		var f nodeFields
		if err := n.Decode(&f); err != nil {
			return err
		}
		*nd = Node(f)
		return nil
	default:
		return fmt.Errorf("want \"host:port\" or {addr: \"host:port\", weight: N}")
	}
}

// MarshalYAML writes the short form when the weight is the default.
func (nd Node) MarshalYAML() (any, error) {
	if nd.Weight == 0 || nd.Weight == 1 {
		return nd.Addr, nil
	}
	return nodeFields(nd), nil
}
