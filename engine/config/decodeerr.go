// Vetting a document against the Config type before it is decoded
// (checkNode), with the scalar rules yaml.v3 does not enforce, and turning
// YAML errors into messages that name the field path.

package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/filters"
)

// explainDecodeError re-walks the document beside the Config type to find
// the first offending key or value and report it by path and line, e.g.
// "config: limits.max_pipelined: unknown field (line 7)". The decoder's own
// message is the fallback.
func explainDecodeError(data []byte, decodeErr error) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil && len(doc.Content) > 0 {
		if err := checkNode(doc.Content[0], reflect.TypeFor[Config](), ""); err != nil {
			return err
		}
	}
	if line, col, ok := tabInIndent(data, decodeErr); ok {
		return fmt.Errorf("config: line %d, column %d: a tab in the indentation; YAML indents with spaces only", line, col)
	}
	// A syntax error, or one checkNode does not model: keep the decoder's
	// words, which carry the line.
	msg := strings.TrimPrefix(decodeErr.Error(), "yaml: ")
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "unmarshal errors:\n"), "\n ", ";")
	return fmt.Errorf("config: %s", strings.TrimSpace(msg))
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// tabInIndent finds the tab behind a YAML error about one: a line, from
// the one before the line the decoder names to the one after (it counts
// some from the line before), whose indentation holds a tab. yaml.v3
// names no column.
func tabInIndent(data []byte, decodeErr error) (line, col int, ok bool) {
	msg := decodeErr.Error()
	if !strings.Contains(msg, "tab") && !strings.Contains(msg, "cannot start any token") {
		return 0, 0, false
	}
	rest, ok := strings.CutPrefix(msg, "yaml: line ")
	if !ok {
		return 0, 0, false
	}
	n, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, ':'), 0)])
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(data), "\n")
	for i := max(n-1, 1); i <= min(n+1, len(lines)); i++ {
		l := lines[i-1]
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if j := strings.IndexByte(indent, '\t'); j >= 0 {
			return i, j + 1, true
		}
	}
	return 0, 0, false
}

// strictScalar refuses what yaml.v3 would coerce into a number or bool
// field: a float into an int (it truncates 1.5 to 1 and reads 1e3 as
// 1000), a leading-zero integer (it reads 017 as octal 15), YAML 1.1
// booleans (it reads yes, on, y and even the quoted "yes" as true), and a
// string for a number, which would otherwise fail in the decoder's words
// (cannot unmarshal !!str). It returns the reason, or "".
func strictScalar(n *yaml.Node, k reflect.Kind) string {
	switch k {
	case reflect.Float32, reflect.Float64:
		if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
			return "want a number, got " + scalarText(n)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.ShortTag() != "!!int" {
			return "want an integer, got " + scalarText(n)
		}
		if digits := strings.TrimLeft(n.Value, "+-"); len(digits) > 1 && digits[0] == '0' && digits[1] >= '0' && digits[1] <= '9' {
			return "want an integer, got " + n.Value + ": YAML reads a leading 0 as octal; write the number without it"
		}
	case reflect.Bool:
		if n.ShortTag() != "!!bool" {
			return "want true or false, got " + scalarText(n)
		}
	}
	return ""
}

// scalarText shows a scalar as written: strings quoted, anything else bare.
func scalarText(n *yaml.Node) string {
	if n.ShortTag() == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

// nodeText says what n is, for "want ..., got ...": a scalar as written,
// else "a list" or "a mapping".
func nodeText(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return scalarText(n)
}

// wantText says what a field of kind k takes, in the words strictScalar
// uses; "" for a kind with no such word.
func wantText(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Map:
		return "a mapping"
	}
	return ""
}

// checkNode reports the first place where n cannot decode into type t, or
// holds a scalar strictScalar refuses.
func checkNode(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.ShortTag() == "!!null" {
		return nil // decodes to the zero value, then gets the default
	}
	for t.Kind() == reflect.Pointer { // optional sections such as routes[].gray
		t = t.Elem()
	}
	custom := reflect.PointerTo(t).Implements(unmarshalerType)
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		return checkMapping(n, t, path)
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode && !custom:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
		return nil
	case custom || t.Kind() != reflect.Struct && t.Kind() != reflect.Slice:
		if !custom {
			// A map's mapping was checked above: what reaches here is not one.
			want := wantText(t.Kind())
			if want != "" && (n.Kind != yaml.ScalarNode || t.Kind() == reflect.Map) {
				return located(path, n.Line, "want "+want+", got "+nodeText(n))
			}
			if reason := strictScalar(n, t.Kind()); n.Kind == yaml.ScalarNode && reason != "" {
				return located(path, n.Line, reason)
			}
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return located(path, n.Line, trimYAMLPrefix(err.Error()))
		}
		return nil
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			if err := checkNode(item, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice:
		return located(path, n.Line, "want a list, got "+nodeText(n))
	default:
		return located(path, n.Line, "want a mapping of fields, got "+nodeText(n))
	}
}

// checkMapping checks each key of n against the yaml tags of struct t.
func checkMapping(n *yaml.Node, t reflect.Type, path string) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if key.Tag == "!!merge" {
			if err := checkNode(value, t, path); err != nil {
				return err
			}
			continue
		}
		field, ok := fieldByTag(t, key.Value)
		if !ok {
			field, ok = filterField(t, key.Value) // a key a filter owns
		}
		if !ok {
			reason := "unknown field"
			if near := nearest(key.Value, knownKeys(t)); near != "" {
				reason += fmt.Sprintf(", did you mean %q?", near)
			}
			return located(joinPath(path, key.Value), key.Line, reason)
		}
		if err := checkNode(value, field.Type, joinPath(path, key.Value)); err != nil {
			return err
		}
	}
	return nil
}

// knownKeys lists the keys a mapping of struct t takes: its fields' and,
// at the top level and in a route, the keys filters own.
func knownKeys(t reflect.Type) []string {
	keys := yamlKeys(t)
	for _, reg := range filters.Registered() {
		switch t {
		case configType:
			keys = append(keys, reg.GlobalKeys()...)
		case routeType:
			keys = append(keys, reg.RouteKeys()...)
		}
	}
	return keys
}

// nearest returns the key in keys closest to s, when it is close enough to
// be the key meant (at most 2 edits, and fewer than a third of s's
// length, so "name" is never offered for "port"), or "".
func nearest(s string, keys []string) string {
	best, bestD := "", min(2, len(s)/3)+1
	for _, k := range keys {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of two neighbours
// ("wieght") each count one.
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func located(path string, line int, reason string) error {
	if path == "" {
		return fmt.Errorf("config: %s (line %d)", reason, line)
	}
	return fmt.Errorf("config: %s: %s (line %d)", path, reason, line)
}

// trimYAMLPrefix strips "yaml: ", "unmarshal errors:" and "line N: " from a
// yaml.v3 message, which checkNode reports in its own form.
func trimYAMLPrefix(msg string) string {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n"); ok {
		lines := strings.Split(rest, "\n")
		for i, l := range lines {
			lines[i] = trimLine(strings.TrimSpace(l))
		}
		return strings.Join(lines, "; ")
	}
	return trimLine(msg)
}

func trimLine(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if _, err := strconv.Atoi(rest[:i]); err == nil {
				return rest[i+2:]
			}
		}
	}
	return msg
}
