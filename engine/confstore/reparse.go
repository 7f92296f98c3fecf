// Reparsing a config file: the routes a file kept, word for word, since the
// last parse are not decoded again.

package confstore

import (
	"bytes"
	"fmt"
	"regexp"
	"unicode/utf8"
	"unsafe"

	"gopkg.in/yaml.v3"
)

// Reparser is Parse for one file read again and again (every reload): a
// route whose text is the same as in the last parse keeps the value that
// parse decoded, so unchanged routes cost a map lookup, not a YAML decode,
// and Diff answers them at once (they are the same map). At 30,000 routes
// the whole decode took most of a reload and allocated about twice the
// document's memory again.
//
// It takes the quick way only for a document it can split by its lines
// alone: one top-level "routes:" key holding a block sequence, and no
// anchor ('&') in the routes, so that each route's text means what it
// means in the whole document. Anything else, or a route whose text does
// not decode on its own, is parsed whole by Parse, with Parse's errors.
// Not safe for concurrent use; the Control calls it under its lock.
type Reparser struct {
	items map[string]any // a route's text: its value, from the last parse
}

// Parse is Parse(data), reusing the routes the last call decoded. It
// keeps data, whose route texts it compares the next call's against: the
// caller must not change data afterwards.
func (p *Reparser) Parse(data []byte) (Doc, error) {
	if d, items, ok := p.split(data); ok {
		p.items = items
		return d, nil
	}
	p.items = nil
	return Parse(data)
}

// routesKey is the top-level line of the routes list, with no value on it.
var routesKey = regexp.MustCompile(`^routes:[ \t]*(#[^\n]*)?\r?\n?$`)

// split is Parse's quick way: the document without its routes, decoded
// whole, and each route's text looked up in p.items or decoded: by
// decodePlainItem when it is of the plainest kind, the others together by
// yaml.v3. It returns the routes' texts with their values, for
// the next call, and false when the document cannot be split.
func (p *Reparser) split(data []byte) (Doc, map[string]any, bool) {
	rest, texts, ok := splitRoutes(data)
	if !ok {
		return nil, nil, false
	}
	d, ok := decodeRest(rest)
	if !ok {
		return nil, nil, false
	}
	list := make([]any, len(texts))
	names := map[string]string{} // the strings the plain routes share, for this parse

	var missing []int
	var joined []byte
	for i, t := range texts {
		if bytes.IndexByte(t, '&') >= 0 {
			return nil, nil, false // an anchor: its aliases may be in other routes
		}
		if v, ok := p.items[string(t)]; ok {
			list[i] = v
			continue
		}
		if m, ok := decodePlainItem(t, names); ok {
			list[i] = m
			continue
		}
		missing = append(missing, i)
		joined = append(joined, t...)
	}
	if len(missing) > 0 {
		var fresh []any
		if err := yaml.Unmarshal(joined, &fresh); err != nil || len(fresh) != len(missing) {
			return nil, nil, false
		}
		for j, i := range missing {
			list[i] = fresh[j]
		}
	}
	items := make(map[string]any, len(texts))
	for i, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if id, _ := m["id"].(string); id == "" {
			// The default id depends on the route's place: decoded anew
			// next time, not kept.
			m["id"] = fmt.Sprintf("route-%d", i)
			continue
		}
		items[unsafe.String(unsafe.SliceData(texts[i]), len(texts[i]))] = v // data is kept, not copied (see Parse)
	}
	d[Routes] = list
	return d, items, true
}

// routesMark stands in rest where the routes list was cut out.
const routesMark = "routes: []\n"

// decodeRest decodes the document splitRoutes left. Its routes must be
// the mark, empty, as a top-level key: a mark inside a quoted scalar or a
// flow collection that began before the cut (the lines were not the
// document's structure) or a routes key named again fails that, and the
// document is decoded whole.
func decodeRest(rest []byte) (Doc, bool) {
	var d Doc
	if err := yaml.Unmarshal(rest, &d); err != nil {
		return nil, false
	}
	if l, ok := d[Routes].([]any); !ok || len(l) != 0 {
		return nil, false
	}
	delete(d, Routes)
	return d, true
}

// lineBreaks are the characters besides \n that end a YAML comment or
// line (a \r alone, NEL, LS, PS): a document holding any is not cut by
// its \n lines. A \r before \n is taken with the line.
var lineBreaks = [][]byte{[]byte("\u0085"), []byte("\u2028"), []byte("\u2029")}

// splitRoutes cuts the routes list out of data by its lines alone: the
// document without it (routesMark in its place), and each item's text.
// ok is false for a document it cannot cut so (see Reparser).
func splitRoutes(data []byte) (rest []byte, texts [][]byte, ok bool) {
	if !utf8.Valid(data) { // yaml.v3 refuses it, even in a comment
		return nil, nil, false
	}
	for _, b := range lineBreaks {
		if bytes.Contains(data, b) {
			return nil, nil, false
		}
	}
	if bytes.Count(data, []byte("\r")) != bytes.Count(data, []byte("\r\n")) {
		return nil, nil, false
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	// at[i] is where lines[i] starts in data: an item's text is the run of
	// its lines, a slice of data, not a copy.
	at := make([]int, len(lines)+1)
	for i, l := range lines {
		at[i+1] = at[i] + len(l)
	}
	start := -1
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("---")) || bytes.HasPrefix(l, []byte("...")) {
			return nil, nil, false // documents: Parse reads the first alone
		}
		if bytes.HasPrefix(l, []byte("routes:")) && routesKey.Match(l) {
			if start >= 0 {
				return nil, nil, false // twice: Parse says why
			}
			start = i
		}
	}
	if start < 0 {
		return nil, nil, false
	}
	// The items start at the first line after the key that holds more
	// than a comment, "- " at some indentation; a line indented less, but
	// for comments and blank lines, ends the list.
	indent, end := -1, len(lines)
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		trimmed := bytes.TrimLeft(l, " ")
		n := len(l) - len(trimmed)
		if blank(trimmed) {
			if len(texts) > 0 {
				texts[len(texts)-1] = data[at[i]-len(texts[len(texts)-1]) : at[i+1] : at[i+1]]
			}
			continue
		}
		if trimmed[0] == '\t' {
			return nil, nil, false
		}
		item := n == indent || indent < 0
		item = item && trimmed[0] == '-' && (len(trimmed) == 1 || trimmed[1] == ' ' || trimmed[1] == '\n' || trimmed[1] == '\r')
		switch {
		case item:
			indent = n
			texts = append(texts, data[at[i]:at[i+1]:at[i+1]])
		case indent >= 0 && n > indent:
			texts[len(texts)-1] = data[at[i]-len(texts[len(texts)-1]) : at[i+1] : at[i+1]]
		case n == 0:
			end = i
		default:
			return nil, nil, false
		}
		if end < len(lines) {
			break
		}
	}
	if len(texts) == 0 {
		return nil, nil, false
	}
	for i, l := range lines {
		if i == start {
			rest = append(rest, routesMark...)
		}
		if i < start || i >= end {
			rest = append(rest, l...)
		}
	}
	return rest, texts, true
}

// blank reports whether a line, its indentation cut, is empty or a comment.
func blank(l []byte) bool {
	l = bytes.TrimRight(l, " \t\r\n")
	return len(l) == 0 || l[0] == '#'
}
