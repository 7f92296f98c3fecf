// Table: Compile builds the exact map and segment tries; Match walks them.

package router

import (
	"bytes"
	"slices"
	"sort"
	"strings"
)

// Table is a compiled, immutable route table. It is safe for concurrent use.
type Table struct {
	// exact maps a normalised path to its candidates, in shards chosen by
	// the path's hash, so that With copies only the shards an edit
	// touches: one map of 30,000 paths copied per API write costs what
	// the write should not.
	exact  [exactShards]map[string]routeSet
	single *node // patterns whose wildcards are all "*"
	multi  *node // patterns ending in "**"
	prefix *node // prefixes, one trie level per segment
	n      int   // specs

	// gone are the slots of the specs With removed since Compile,
	// ascending. A candidate holds its spec's slot, which an edit never
	// moves: its index at Compile, or Len+len(gone) when With appended it.
	// A spec's index is its slot less the removed slots below it, so a
	// spec removed from the middle of a list leaves every other
	// candidate as it was, where renumbering them all meant compiling the
	// table again. Empty after Compile, and then every slot is its index.
	gone []int
}

// Result is what Match found.
type Result struct {
	// Index is the chosen spec's slot when Found, and -1 otherwise: for
	// a table Compile built, the spec's index; for one With edited, the
	// index it had at Compile, or the slot With appended it at, which no
	// later edit moves (see Table.gone). MatchIndex gives the index in the
	// list the table is now of.
	Index int
	// Found reports that a route accepts the request.
	Found bool
	// Allow lists, sorted and comma-space separated ("GET, HEAD, POST"),
	// the methods accepted by the most specific route path that matched
	// the request's path and host, when none of its routes accepts the
	// request's method: answer 405 with this as the Allow header. It is ""
	// otherwise, so Found == false && Allow == "" is a 404. The string is
	// built at Compile time and shared; Match allocates nothing for it.
	Allow string
	// Matched is how many leading bytes of the path passed to Match the
	// route covered, when Found; 0 otherwise. For exact and wildcard
	// routes it is len(path). For a prefix route it is the offset where
	// the input segment matching the prefix's last segment ends, so
	// path[Matched:] is "" or starts with '/': prefix "/rw/" against
	// "/RW/v1" gives 3 (path[3:] == "/v1"), against "/rw;x/v1" gives 5,
	// and prefix "/" gives 0.
	Matched int
}

// Compile validates specs and builds a Table whose Match returns indexes
// into specs. An empty specs slice yields a table that matches nothing.
// Every error is a *SpecError.
func Compile(specs []Spec) (*Table, error) {
	// Sized for specs: most routes of a large table are exact paths.
	t := &Table{n: len(specs)}
	for i := range t.exact {
		t.exact[i] = make(map[string]routeSet, len(specs)/exactShards)
	}
	// Duplicates: an exact path's are found in its route set, where it is
	// filed anyway; only the other kinds need a map of keys (a map of
	// every route's key cost a 30,000-route compile a third of its time).
	var seen map[string]int
	// The candidates of paths with one route each (most of them), in one
	// array: 30,000 small allocations fewer for a large table.
	slab := make([]candidate, 0, len(specs))
	for i, s := range specs {
		c, err := compileSpec(i, s)
		if err != nil {
			return nil, err
		}
		if c.kind == kindExact {
			for _, cand := range t.exact[shardOf(c.pattern)][c.pattern] {
				if cand.host == c.host && slices.Equal(cand.methods, c.methods) {
					return nil, &SpecError{Index: i, Duplicate: true, Of: cand.index}
				}
			}
		} else {
			k := c.key()
			if first, dup := seen[k]; dup {
				return nil, &SpecError{Index: i, Duplicate: true, Of: first}
			}
			if seen == nil {
				seen = map[string]int{}
			}
			seen[k] = i
		}
		slab = t.add(c, slab)
	}
	t.finish()
	return t, nil
}

// add files c under the structure for its kind. The first candidate of
// an exact path goes into slab (never grown past its capacity, so the
// sets made from it stay where they are), whose rest it returns.
func (t *Table) add(c compiled, slab []candidate) []candidate {
	cand := candidate{host: c.host, methods: c.methods, index: c.index}
	switch c.kind {
	case kindExact:
		m := t.exact[shardOf(c.pattern)]
		if set, ok := m[c.pattern]; ok || len(slab) == cap(slab) {
			m[c.pattern] = append(set, cand)
		} else {
			slab = append(slab, cand)
			m[c.pattern] = slab[len(slab)-1 : len(slab) : len(slab)]
		}
	case kindSingle:
		t.single = t.single.insert(c.pattern, cand)
	case kindMulti:
		t.multi = t.multi.insert(c.pattern, cand)
	case kindPrefix:
		t.prefix = t.prefix.insert(c.pattern, cand)
	}
	return slab
}

// finish orders every route set and precomputes its Allow strings.
func (t *Table) finish() {
	for _, m := range t.exact {
		for _, set := range m {
			set.finish()
		}
	}
	for _, root := range []*node{t.single, t.multi, t.prefix} {
		root.walk(func(n *node) {
			n.routes.finish()
			n.rest.finish()
		})
	}
}

// Len reports how many specs the table was compiled from.
// Safe for concurrent use.
func (t *Table) Len() int { return t.n }

// Slots is how many slots the table numbers (see Result.Index): Len, and
// the removed slots below the last spec's. Safe for concurrent use.
func (t *Table) Slots() int { return t.n + len(t.gone) }

// Gone lists the removed slots, ascending: a spec's index is its slot
// less the removed slots below it. The caller must not modify it. Safe
// for concurrent use.
func (t *Table) Gone() []int { return t.gone }

// SlotOf is the slot of the spec at index i, 0 <= i < Len: i, and one
// more for each removed slot below the spec's (found by a binary search:
// gone[m]-m, the index of the slot after removed slot m, only grows).
// Safe for concurrent use.
func (t *Table) SlotOf(i int) int {
	return i + sort.Search(len(t.gone), func(m int) bool { return t.gone[m]-m > i })
}

// Match finds the route for a request, following the precedence and 405
// rules in the package documentation. host is the Host value (normalised
// by the engine; a port, IPv6 brackets and one trailing dot are tolerated);
// method is the request method as received; path is the request target
// without its query (normalised by the engine).
//
// scratch is a caller-owned buffer used for the lowercased, parameter-free
// copy of the path, e.g. one per event loop; it must not overlap path.
// With cap(scratch) >= len(path) Match allocates nothing (otherwise it may
// allocate a temporary). Match retains none of its arguments and does not
// modify path or host. Safe for concurrent use, provided scratch is not
// shared.
//
// Result.Index is the spec's slot: a list kept by slot, with an empty
// place for each removed spec (Gone), is one a spec removed from its
// middle leaves in place, as the engine keeps its compiled routes.
func (t *Table) Match(host, method, path, scratch []byte) Result {
	if len(path) == 0 || path[0] != '/' {
		return Result{Index: -1}
	}
	p, params := normalisePath(path, scratch)
	host = requestHost(host)

	if set, ok := t.exact[shardOfBytes(p)][string(p)]; ok {
		if i, allow, hit := set.pick(host, method); hit {
			return result(i, allow, len(path))
		}
	}
	if i, allow, hit := t.single.match(p[1:], false, host, method); hit {
		return result(i, allow, len(path))
	}
	if i, allow, hit := t.multi.match(p[1:], false, host, method); hit {
		return result(i, allow, len(path))
	}
	if i, allow, depth, hit := t.prefix.longest(p[1:], false, 0, host, method); hit {
		matched := 0
		if i >= 0 {
			matched = segmentEnd(path, depth, params)
		}
		return result(i, allow, matched)
	}
	return Result{Index: -1}
}

// MatchIndex is Match with Result.Index the chosen spec's index in the
// list the table is of: its slot less the removed slots below it. Safe
// for concurrent use, as Match.
func (t *Table) MatchIndex(host, method, path, scratch []byte) Result {
	r := t.Match(host, method, path, scratch)
	r.Index = t.at(r.Index)
	return r
}

// result builds the Result for a route set's verdict: index >= 0 is a
// match, otherwise allow holds the methods for a 405.
func result(index int, allow string, matched int) Result {
	if index < 0 {
		return Result{Index: -1, Allow: allow}
	}
	return Result{Index: index, Found: true, Matched: matched}
}

// normalisePath returns the path as matching sees it: ASCII lowercased,
// one trailing slash dropped (keeping "/"). When the path contains ';' it
// also strips each segment's ";params" and, as a servlet container does
// after stripping, drops empty and "." segments and resolves ".." (params
// is then true). It copies into scratch only when something changes.
func normalisePath(path, scratch []byte) (p []byte, params bool) {
	upper := 0
	for upper < len(path) && !needsCopy[path[upper]] {
		upper++
	}
	if upper < len(path) && (path[upper] == ';' || bytes.IndexByte(path[upper+1:], ';') >= 0) {
		return stripParams(path, scratch), true
	}
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	if upper >= len(path) {
		return path, false
	}
	out := grow(scratch, len(path))[:len(path)]
	copy(out, path[:upper])
	for i := upper; i < len(path); i++ {
		out[i] = lower(path[i])
	}
	return out, false
}

// needsCopy marks the bytes that make normalisePath copy: 'A'-'Z' and ';'.
var needsCopy = func() (t [256]bool) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	t[';'] = true
	return t
}()

// stripParams is normalisePath for a path containing ';'. The result is
// never longer than path.
func stripParams(path, scratch []byte) []byte {
	out := grow(scratch, len(path))
	for i := 1; ; {
		j, name := nextSegment(path, i)
		switch {
		case len(name) == 0 || len(name) == 1 && name[0] == '.':
		case len(name) == 2 && name[0] == '.' && name[1] == '.':
			out = out[:max(bytes.LastIndexByte(out, '/'), 0)]
		default:
			out = append(out, '/')
			for _, c := range name {
				out = append(out, lower(c))
			}
		}
		if j >= len(path) {
			break
		}
		i = j + 1
	}
	if len(out) == 0 {
		out = append(out, '/')
	}
	return out
}

// nextSegment returns the end j of the segment starting at path[i] (the
// next '/' or len(path)) and its name without ";params".
func nextSegment(path []byte, i int) (j int, name []byte) {
	j = i
	for j < len(path) && path[j] != '/' {
		j++
	}
	name = path[i:j]
	if k := bytes.IndexByte(name, ';'); k >= 0 {
		name = name[:k]
	}
	return j, name
}

// segmentEnd maps a depth in the normalised path back to the input: the
// offset in path where the input segment that became normalised segment
// number depth ends (0 for depth 0). params says normalisePath stripped
// parameters, so segments may have been dropped or resolved.
func segmentEnd(path []byte, depth int, params bool) int {
	if depth == 0 {
		return 0
	}
	if !params {
		n := 0
		for i := 1; i < len(path); i++ {
			if path[i] == '/' {
				if n++; n == depth {
					return i
				}
			}
		}
		return len(path)
	}
	// Replay stripParams' stack: the last push to height depth is the
	// segment that survived there.
	end, height := len(path), 0
	for i := 1; ; {
		j, name := nextSegment(path, i)
		switch {
		case len(name) == 0 || len(name) == 1 && name[0] == '.':
		case len(name) == 2 && name[0] == '.' && name[1] == '.':
			height = max(height-1, 0)
		default:
			if height++; height == depth {
				end = j
			}
		}
		if j >= len(path) {
			return end
		}
		i = j + 1
	}
}

// grow returns scratch emptied, or a new buffer if its capacity is below n.
func grow(scratch []byte, n int) []byte {
	if cap(scratch) < n {
		return make([]byte, 0, n)
	}
	return scratch[:0]
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// requestHost reduces a Host value to the form spec hosts are stored in:
// the engine passes it lowercased, without port or trailing dot, and with
// IPv6 brackets ("[::1]"); this also tolerates a port ("[::1]:8080",
// "a.test:80"), one trailing dot and a bare IPv6 literal ("::1"). Brackets
// are removed. Case is handled by the comparison.
func requestHost(host []byte) []byte {
	if len(host) > 0 && host[0] == '[' {
		if i := bytes.IndexByte(host, ']'); i > 0 {
			return host[1:i]
		}
		return host // malformed: matches no spec host
	}
	if i := bytes.IndexByte(host, ':'); i >= 0 {
		if bytes.IndexByte(host[i+1:], ':') >= 0 {
			return host // bare IPv6 literal: no port to strip
		}
		host = host[:i]
	}
	if n := len(host); n > 1 && host[n-1] == '.' {
		host = host[:n-1]
	}
	return host
}

// candidate is one spec competing for a path once the path has matched.
type candidate struct {
	host    string   // lowercased; "" = any host
	methods []string // uppercased, sorted, HEAD added to GET; nil = any method
	index   int      // the spec's slot: its index once the removed slots below it are taken off (Table.gone)

	// allow is the 405 Allow value when this is the first candidate that
	// accepts the request's host: the union of the methods of every
	// candidate in the set accepting that host. Set by finish.
	allow string
}

// routeSet holds the candidates for one path, in preference order after
// finish.
type routeSet []candidate

// finish orders host-specific before any-host, method-restricted before
// any-method, then spec order, and fills in each candidate's allow.
func (s routeSet) finish() {
	if len(s) == 1 { // most sets: nothing to order, and its Allow is its own
		s[0].allow = s.allowFor(s[0].host)
		return
	}
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
	for i := range s {
		s[i].allow = s.allowFor(s[i].host)
	}
}

// allowFor is the Allow value for a request whose host is host, or that
// matches no host-specific candidate if host is "": the sorted union of
// the methods of the candidates that accept it, or "" if one of those
// accepts any method (then no 405 can happen).
func (s routeSet) allowFor(host string) string {
	var methods []string
	for _, c := range s {
		if c.host != "" && c.host != host {
			continue
		}
		if c.methods == nil {
			return ""
		}
		methods = append(methods, c.methods...)
	}
	slices.Sort(methods)
	return strings.Join(slices.Compact(methods), ", ")
}

// pick chooses among the set's candidates. hit is false when none accepts
// the host, so the path did not match and the caller tries the next
// alternative. Otherwise index is the first candidate accepting both host
// and method, or -1 with allow set when none accepts the method.
func (s routeSet) pick(host, method []byte) (index int, allow string, hit bool) {
	for i := range s {
		c := &s[i]
		if c.host != "" && !equalFoldLower(host, c.host) {
			continue
		}
		if !hit {
			hit, allow = true, c.allow
		}
		if c.methods == nil || containsMethod(c.methods, method) {
			return c.index, "", true
		}
	}
	return -1, allow, hit
}

// equalFoldLower compares b, in any ASCII case, with the lowercase s.
func equalFoldLower(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != s[i] {
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
