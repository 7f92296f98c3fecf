// lineIndex: where each field path of a YAML document is written, so that
// validation errors can give the line.

package config

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// lineIndex maps a field path, spelt as validation spells it
// ("routes[2].upstream", "filter_orders.auth"), to the line of its key, or
// for a list item to the line where the item starts. A nil index knows no
// lines.
type lineIndex map[string]int

// indexLines indexes the one document in data. It returns nil when data
// does not parse; Parse only calls it on data that decoded.
func indexLines(data []byte) lineIndex {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	lines := make(lineIndex)
	lines.walk(doc.Content[0], "")
	return lines
}

// walk records the lines of everything under n, whose path is path. Aliases
// are not followed: a path through one falls back to the alias's own line.
func (l lineIndex) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if key.Tag == "!!merge" {
				continue // merged keys keep the lines of the mapping they came from
			}
			p := joinPath(path, key.Value)
			l[p] = key.Line
			l.walk(value, p)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			l[p] = item.Line
			l.walk(item, p)
		}
	}
}

// lineOf returns the line of path, or of its nearest ancestor written in
// the document when path itself is not (a missing field, a default): for
// "routes[1].upstream" left out, the line where routes[1] starts. It
// returns 0 when no part of path is in the document.
func (l lineIndex) lineOf(path string) int {
	for path != "" {
		if n, ok := l[path]; ok {
			return n
		}
		path = path[:max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['), 0)]
	}
	return 0
}
