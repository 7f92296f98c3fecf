// Table: Compile builds the exact map and segment tries; Match walks them.

package router

import "sort"

// Table is a compiled, immutable route table. It is safe for concurrent use.
type Table struct {
	exact  map[string]routeSet // normalised path -> candidates
	single *node               // patterns whose wildcards are all "*"
	multi  *node               // patterns ending in "**"
	prefix *node               // prefixes, one trie level per segment
	n      int
}

// Compile validates specs and builds a Table whose Match returns indexes
// into specs. An empty specs slice yields a table that matches nothing.
// Every error is a *SpecError.
func Compile(specs []Spec) (*Table, error) {
	t := &Table{exact: make(map[string]routeSet), n: len(specs)}
	seen := make(map[string]int, len(specs))
	for i, s := range specs {
		c, err := compileSpec(i, s)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[c.key()]; dup {
			return nil, &SpecError{Index: i, Duplicate: true, Of: first}
		}
		seen[c.key()] = i
		t.add(c)
	}
	t.sortCandidates()
	return t, nil
}

// add files c under the structure for its kind.
func (t *Table) add(c compiled) {
	cand := candidate{host: c.host, methods: c.methods, index: c.index}
	switch c.kind {
	case kindExact:
		t.exact[c.pattern] = append(t.exact[c.pattern], cand)
	case kindSingle:
		t.single = t.single.insert(c.pattern, cand)
	case kindMulti:
		t.multi = t.multi.insert(c.pattern, cand)
	case kindPrefix:
		t.prefix = t.prefix.insert(c.pattern, cand)
	}
}

func (t *Table) sortCandidates() {
	for _, set := range t.exact {
		set.sort()
	}
	for _, root := range []*node{t.single, t.multi, t.prefix} {
		root.walk(func(n *node) {
			n.routes.sort()
			n.rest.sort()
		})
	}
}

// Len reports how many specs the table was compiled from.
// Safe for concurrent use.
func (t *Table) Len() int { return t.n }

// Match returns the index of the spec that routes this request, following
// the precedence in the package documentation. host is the Host header and
// may carry a port; method is the request method as received; path is the
// request target without its query.
//
// scratch is a caller-owned buffer used to lowercase the path, e.g. one per
// event loop; with cap(scratch) >= len(path) Match allocates nothing
// (otherwise it allocates a temporary). Match retains none of its arguments.
// Safe for concurrent use, provided scratch is not shared.
func (t *Table) Match(host, method, path, scratch []byte) (index int, ok bool) {
	if len(path) == 0 || path[0] != '/' {
		return -1, false
	}
	p := normalisePath(path, scratch)
	host = stripPort(host)

	if set, found := t.exact[string(p)]; found {
		if i, ok := set.pick(host, method); ok {
			return i, true
		}
	}
	if i, ok := t.single.match(p[1:], false, host, method); ok {
		return i, true
	}
	if i, ok := t.multi.match(p[1:], false, host, method); ok {
		return i, true
	}
	return t.prefix.longest(p[1:], false, host, method)
}

// normalisePath drops one trailing slash (keeping "/") and lowercases ASCII,
// copying into scratch only when the path has an uppercase letter.
func normalisePath(path, scratch []byte) []byte {
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	upper := -1
	for i, c := range path {
		if 'A' <= c && c <= 'Z' {
			upper = i
			break
		}
	}
	if upper < 0 {
		return path
	}
	if cap(scratch) < len(path) {
		scratch = make([]byte, len(path))
	}
	out := scratch[:len(path)]
	copy(out, path[:upper])
	for i := upper; i < len(path); i++ {
		c := path[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// stripPort removes ":port" and IPv6 brackets from a Host header value.
func stripPort(host []byte) []byte {
	if len(host) > 0 && host[0] == '[' {
		for i := 1; i < len(host); i++ {
			if host[i] == ']' {
				return host[1:i]
			}
		}
		return host
	}
	for i := len(host) - 1; i >= 0; i-- {
		if host[i] == ':' {
			return host[:i]
		}
	}
	return host
}

// candidate is one spec competing for a path once the path has matched.
type candidate struct {
	host    string   // lowercased; "" = any host
	methods []string // uppercased; nil = any method
	index   int      // spec index
}

// routeSet holds the candidates for one path, in preference order after sort.
type routeSet []candidate

// sort orders host-specific before any-host, method-restricted before
// any-method, then spec order.
func (s routeSet) sort() {
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i], s[j]
		if (a.host != "") != (b.host != "") {
			return a.host != ""
		}
		if (a.methods != nil) != (b.methods != nil) {
			return a.methods != nil
		}
		return a.index < b.index
	})
}

// pick returns the first candidate whose host and method accept the request.
func (s routeSet) pick(host, method []byte) (int, bool) {
	for i := range s {
		c := &s[i]
		if c.host != "" && !equalFoldLower(host, c.host) {
			continue
		}
		if c.methods != nil && !containsMethod(c.methods, method) {
			continue
		}
		return c.index, true
	}
	return -1, false
}

// equalFoldLower compares b, in any ASCII case, with the lowercase s.
func equalFoldLower(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func containsMethod(methods []string, method []byte) bool {
	for _, m := range methods {
		if string(method) == m {
			return true
		}
	}
	return false
}
