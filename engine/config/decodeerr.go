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
	// A syntax error, or one checkNode does not model: keep the decoder's
	// words, which carry the line.
	msg := strings.TrimPrefix(decodeErr.Error(), "yaml: ")
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "unmarshal errors:\n"), "\n ", ";")
	return fmt.Errorf("config: %s", strings.TrimSpace(msg))
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// strictScalar refuses what yaml.v3 would coerce into an int or bool field:
// a float (it truncates 1.5 to 1 and reads 1e3 as 1000), a leading-zero
// integer (it reads 017 as octal 15), and YAML 1.1 booleans (it reads yes,
// on, y and even the quoted "yes" as true). It returns the reason, or "".
func strictScalar(n *yaml.Node, k reflect.Kind) string {
	switch k {
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
		if !custom && n.Kind == yaml.ScalarNode {
			if reason := strictScalar(n, t.Kind()); reason != "" {
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
		return located(path, n.Line, "want a list")
	default:
		return located(path, n.Line, "want a mapping of fields")
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
			return located(joinPath(path, key.Value), key.Line, "unknown field")
		}
		if err := checkNode(value, field.Type, joinPath(path, key.Value)); err != nil {
			return err
		}
	}
	return nil
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
