// Decoding the plainest route items without the YAML decoder.

package confstore

import (
	"bytes"
)

// decodePlainItem decodes one item of a block sequence, as split cut it
// from the document ("- " and the item's lines), when it is a mapping of
// the plainest kind: a flow mapping on the item's line, or a block
// mapping with one key a line at one indentation, whose values are all
// plain or simply quoted strings, or flow sequences of them. That is the
// shape of nearly every route of a large config, and the YAML decoder
// took most of a reload of 30,000 changed routes (about 20 µs a route).
// ok is false for anything else, which the caller decodes with yaml.v3:
// a scalar the YAML schema would read as anything but a string (true, ~,
// 12, 0x1f, .inf), a key written twice, nesting, anchors, tags, escapes,
// multi-line scalars, a carriage return, a tab. The result is what
// yaml.Unmarshal gives for the same item (TestPlainItemAgreesWithYAML).
//
// Keys, and the values of keys other than id, path and prefix (upstream
// names, methods, hosts: the same few strings in thousands of routes),
// are taken from names when it holds them, and added to it otherwise, so
// the routes share one copy of each (names may be nil).
func decodePlainItem(text []byte, names map[string]string) (map[string]any, bool) {
	if bytes.IndexByte(text, '\r') >= 0 || bytes.IndexByte(text, '\t') >= 0 {
		return nil, false
	}
	first, rest, _ := bytes.Cut(text, []byte("\n"))
	dash := len(first) - len(bytes.TrimLeft(first, " "))
	line := first[dash:]
	if len(line) < 2 || line[0] != '-' || line[1] != ' ' {
		return nil, false
	}
	body := bytes.TrimLeft(line[2:], " ")
	indent := len(first) - len(body) // a block mapping's keys stand here
	m := map[string]any{}
	if len(body) > 0 && body[0] == '{' {
		s := scanner{b: body, names: names}
		if !s.flowMapping(m) || !s.end() || !onlyBlank(rest) {
			return nil, false
		}
		return m, true
	}
	if !blockPair(body, m, names) {
		return nil, false
	}
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		trimmed := bytes.TrimLeft(l, " ")
		if len(trimmed) == 0 || trimmed[0] == '#' {
			continue
		}
		if len(l)-len(trimmed) != indent || !blockPair(trimmed, m, names) {
			return nil, false
		}
	}
	return m, true
}

// blockPair decodes one "key: value" line of a block mapping into m.
func blockPair(l []byte, m map[string]any, names map[string]string) bool {
	s := scanner{b: l, names: names}
	return s.pair(m) && s.end()
}

// onlyBlank reports whether every line of b is blank or a comment.
func onlyBlank(b []byte) bool {
	for len(b) > 0 {
		var l []byte
		l, b, _ = bytes.Cut(b, []byte("\n"))
		if l = bytes.TrimLeft(l, " "); len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// scanner reads the plain subset decodePlainItem takes, on one line.
type scanner struct {
	b     []byte
	i     int
	names map[string]string // see decodePlainItem
	share bool              // the value being read is shared through names
}

func (s *scanner) spaces() {
	for s.i < len(s.b) && s.b[s.i] == ' ' {
		s.i++
	}
}

// end accepts the rest of the line: spaces, then a comment or nothing.
func (s *scanner) end() bool {
	start := s.i
	s.spaces()
	if s.i == len(s.b) {
		return true
	}
	return s.b[s.i] == '#' && (s.i > start || s.i == 0)
}

// flowMapping reads "{k: v, k: v}" into m; an empty one is left to yaml.
func (s *scanner) flowMapping(m map[string]any) bool {
	s.i++ // '{'
	for {
		s.spaces()
		if !s.pair(m) {
			return false
		}
		s.spaces()
		if s.i == len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case '}':
			s.i++
			return true
		case ',':
			s.i++
		default:
			return false
		}
	}
}

// pair reads "key: value" into m, refusing a key m already holds.
func (s *scanner) pair(m map[string]any) bool {
	start := s.i
	for s.i < len(s.b) && (lower(s.b[s.i]) || s.b[s.i] == '_' || s.i > start && digit(s.b[s.i])) {
		s.i++
	}
	if s.i == start || s.i+1 >= len(s.b) || s.b[s.i] != ':' || s.b[s.i+1] != ' ' {
		return false
	}
	key := s.shared(s.b[start:s.i])
	if _, dup := m[key]; dup || specialWord(s.b[start:s.i]) {
		return false
	}
	s.share = key != "id" && key != "path" && key != "prefix"
	s.i += 2
	s.spaces()
	v, ok := s.value()
	if ok {
		m[key] = v
	}
	return ok
}

// value reads a string or a flow sequence of strings.
func (s *scanner) value() (any, bool) {
	if s.i < len(s.b) && s.b[s.i] == '[' {
		s.i++
		list := []any{}
		s.spaces()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return list, true
		}
		for {
			s.spaces()
			v, ok := s.scalar()
			if !ok {
				return nil, false
			}
			list = append(list, v)
			s.spaces()
			if s.i == len(s.b) {
				return nil, false
			}
			switch s.b[s.i] {
			case ']':
				s.i++
				return list, true
			case ',':
				s.i++
			default:
				return nil, false
			}
		}
	}
	return s.scalar()
}

// scalar reads a quoted string with no escape, or a plain scalar of
// letters, digits and "/_.-*" that starts with a letter or '/' and
// is no word the schema reads as a bool or a null: every such scalar is
// a string to yaml.v3, in flow and block context alike. (The block
// context's wider plain scalars are left to yaml.)
func (s *scanner) scalar() (string, bool) {
	if s.i == len(s.b) {
		return "", false
	}
	switch q := s.b[s.i]; q {
	case '"', '\'':
		end := bytes.IndexByte(s.b[s.i+1:], q)
		if end < 0 {
			return "", false
		}
		v := s.b[s.i+1 : s.i+1+end]
		for _, c := range v {
			if c < 0x20 || c > 0x7e || c == '\\' {
				return "", false
			}
		}
		s.i += end + 2
		if q == '\'' && s.i < len(s.b) && s.b[s.i] == '\'' {
			return "", false // '' is an escaped quote
		}
		return s.str(v), true
	}
	start := s.i
	for s.i < len(s.b) && plainByte(s.b[s.i]) {
		s.i++
	}
	v := s.b[start:s.i]
	if len(v) == 0 || !(letter(v[0]) || v[0] == '/') || specialWord(v) {
		return "", false
	}
	return s.str(v), true
}

// str is v as a string, shared through names when s.share.
func (s *scanner) str(v []byte) string {
	if s.share {
		return s.shared(v)
	}
	return string(v)
}

// shared is v as a string, the copy in names when there is one.
func (s *scanner) shared(v []byte) string {
	if s.names == nil {
		return string(v)
	}
	if str, ok := s.names[string(v)]; ok {
		return str
	}
	str := string(v)
	s.names[str] = str
	return str
}

func lower(c byte) bool  { return c >= 'a' && c <= 'z' }
func digit(c byte) bool  { return c >= '0' && c <= '9' }
func letter(c byte) bool { return lower(c) || c >= 'A' && c <= 'Z' }

func plainByte(c byte) bool {
	return letter(c) || digit(c) || c == '/' || c == '_' || c == '.' || c == '-' || c == '*'
}

// specialWord reports whether v is, in any case, a word YAML 1.1 or 1.2
// reads as a bool or a null.
func specialWord(v []byte) bool {
	if len(v) > 5 {
		return false
	}
	for _, w := range specialWords {
		if bytes.EqualFold(v, w) {
			return true
		}
	}
	return false
}

var specialWords = [][]byte{[]byte("true"), []byte("false"), []byte("null"), []byte("yes"), []byte("no"),
	[]byte("on"), []byte("off"), []byte("y"), []byte("n")}

// PlainRoutes cuts data as the Reparser does when every route in it is of
// the plainest kind (decodePlainItem): the document with its routes list
// emptied (`routes: []` in its place), and the routes, decoded, in order. ok is false for a document the
// cut does not apply to, a route of another kind, an anchor among the
// routes, or a document that names routes again outside the list; the
// caller decodes such a document whole. config.Parse takes this way for a
// large config, whose routes are then never seen by the YAML decoder.
func PlainRoutes(data []byte) (rest []byte, routes []map[string]any, ok bool) {
	rest, texts, ok := splitRoutes(data)
	if !ok {
		return nil, nil, false
	}
	names := map[string]string{}
	routes = make([]map[string]any, len(texts))
	for i, t := range texts {
		if bytes.IndexByte(t, '&') >= 0 {
			return nil, nil, false
		}
		if routes[i], ok = decodePlainItem(t, names); !ok {
			return nil, nil, false
		}
	}
	if _, ok := decodeRest(rest); !ok {
		return nil, nil, false
	}
	return rest, routes, true
}
