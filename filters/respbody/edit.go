// The editor: one pass over a valid JSON body that applies the masks and
// removals, copying the untouched spans between them.

package respbody

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// action is what a rule does to the value its path names.
type action uint8

const (
	actRemove   action = iota + 1 // drop the member (or array element), with its comma
	actMask                       // replace the value with the rule's replacement
	actKeepLast                   // mask all but the last keep characters of a string or number
)

// rule is one compiled mask or remove.
type rule struct {
	segs []segment
	act  action
	repl []byte // actMask, and actKeepLast on a value that is neither string nor number: a JSON string
	keep int    // actKeepLast: characters kept
}

// maxRules bounds a route's masks and removals together: the editor keeps
// the rules still matching as bits of one word.
const maxRules = 64

// editor applies a route's rules. Immutable; safe for concurrent use.
type editor struct {
	rules []rule
	all   uint64 // a bit for each rule
}

func newEditor(rules []rule) *editor {
	e := &editor{rules: rules}
	if len(rules) > 0 {
		e.all = ^uint64(0) >> (64 - len(rules))
	}
	return e
}

// pass is one body being edited: the bytes before last are in dst.
type pass struct {
	e       *editor
	src     []byte
	dst     []byte
	last    int
	changed bool
}

// edit appends src to dst with the rules applied, and reports whether any
// rule matched. src must be valid JSON (sonic.Valid): the scanner trusts
// its structure and checks nothing.
func (e *editor) edit(src, dst []byte) ([]byte, bool) {
	p := pass{e: e, src: src, dst: dst}
	if i := ws(src, 0); e.all != 0 && i < len(src) && (src[i] == '{' || src[i] == '[') {
		p.container(i, e.all, 0)
	}
	p.dst = append(p.dst, src[p.last:]...)
	return p.dst, p.changed
}

// cut drops src[from:to] from the output, writing with in its place.
func (p *pass) cut(from, to int, with []byte) {
	p.dst = append(p.dst, p.src[p.last:from]...)
	p.dst = append(p.dst, with...)
	p.last = to
	p.changed = true
}

// container walks the object or array at i, whose members the rules in
// active may match at depth, and returns the index past it. A member is
// descended into only while some rule's path goes deeper, so the walk is
// never deeper than the longest path.
func (p *pass) container(i int, active uint64, depth int) int {
	src, rules := p.src, p.e.rules
	obj := src[i] == '{'
	i++
	kept := false // a member of this container is in the output
	prevEnd := i  // past the previous member's value
	for n := 0; ; n++ {
		i = ws(src, i)
		if src[i] == '}' || src[i] == ']' {
			return i + 1
		}
		if src[i] == ',' {
			i = ws(src, i+1)
		}
		start := i
		var key []byte
		if obj {
			end := skipString(src, i)
			key = src[i+1 : end-1]
			i = ws(src, ws(src, end)+1) // past the colon
		}
		var child uint64
		term := -1
		for b := active; b != 0; b &= b - 1 {
			r := bits.TrailingZeros64(b)
			s := &rules[r].segs[depth]
			switch {
			case s.kind == segAny:
			case obj && s.kind == segKey && bytes.Equal(s.key, key):
			case !obj && s.kind == segIndex && s.index == n:
			default:
				continue
			}
			if depth+1 < len(rules[r].segs) {
				child |= 1 << r
			} else if term < 0 || rules[r].act == actRemove && rules[term].act != actRemove {
				term = r // a removal wins over a mask; else the first rule
			}
		}
		var end int
		switch {
		case term >= 0 && rules[term].act == actRemove:
			end = skipValue(src, i)
			if n == 0 {
				p.cut(start, end, nil) // its comma, if any, goes with the next member kept
			} else {
				p.cut(prevEnd, end, nil) // with the comma before it
			}
		default:
			if !kept && n > 0 {
				p.cut(prevEnd, start, nil) // every member before was removed: so is the comma
			}
			kept = true
			switch {
			case term >= 0:
				end = skipValue(src, i)
				p.mask(&rules[term], i, end)
			case child != 0 && (src[i] == '{' || src[i] == '['):
				end = p.container(i, child, depth+1)
			default:
				end = skipValue(src, i)
			}
		}
		prevEnd, i = end, end
	}
}

// mask writes the masked form of the value src[from:to].
func (p *pass) mask(r *rule, from, to int) {
	v := p.src[from:to]
	if r.act == actMask || !(v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		p.cut(from, to, r.repl)
		return
	}
	content := v
	if v[0] == '"' {
		content = v[1 : len(v)-1]
	}
	var total, tail int // characters, and the offset of the last keep
	if plainASCII(content) {
		total, tail = len(content), len(content)-r.keep
	} else {
		total = countUnits(content)
		tail = skipUnits(content, total-r.keep)
	}
	masked := total - r.keep
	if total <= r.keep {
		masked, tail = total, len(content) // all of it would show: mask it all
	}
	p.cut(from, to, nil)
	p.dst = append(p.dst, '"')
	for ; masked > len(stars); masked -= len(stars) {
		p.dst = append(p.dst, stars...)
	}
	p.dst = append(p.dst, stars[:masked]...)
	p.dst = append(p.dst, content[tail:]...)
	p.dst = append(p.dst, '"')
}

const stars = "****************************************************************"

// plainASCII reports whether s is ASCII without escapes, so that each
// byte is a character: the common case of numbers, phones and cards.
func plainASCII(s []byte) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64(s[i:])&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return bytes.IndexByte(s, '\\') < 0
}

// countUnits counts the characters of a JSON string's raw content: an escape
// (\n, \uXXXX) is one, a UTF-8 sequence is one.
func countUnits(s []byte) int {
	n := 0
	for i := 0; i < len(s); n++ {
		i += unitLen(s, i)
	}
	return n
}

// skipUnits returns the offset of the character after the first n.
func skipUnits(s []byte, n int) int {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		i += unitLen(s, i)
	}
	return i
}

func unitLen(s []byte, i int) int {
	c := s[i]
	switch {
	case c == '\\':
		if i+1 < len(s) && s[i+1] == 'u' {
			return min(6, len(s)-i)
		}
		return min(2, len(s)-i)
	case c < 0x80:
		return 1
	case c >= 0xF0:
		return min(4, len(s)-i)
	case c >= 0xE0:
		return min(3, len(s)-i)
	}
	return min(2, len(s)-i)
}

// ws skips JSON whitespace from i.
func ws(s []byte, i int) int {
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index past the string whose opening quote is at i.
func skipString(s []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(s[j:], '"')
		if k < 0 {
			return len(s) // not reached on valid JSON
		}
		j += k
		bs := 0
		for b := j - 1; b > i && s[b] == '\\'; b-- {
			bs++
		}
		j++
		if bs%2 == 0 {
			return j
		}
	}
}

// skipValue returns the index past the value at i.
func skipValue(s []byte, i int) int {
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		d := 0
		for j := i; j < len(s); {
			switch s[j] {
			case '"':
				j = skipString(s, j)
				continue
			case '{', '[':
				d++
			case '}', ']':
				if d--; d == 0 {
					return j + 1
				}
			}
			j++
		}
		return len(s)
	}
	j := i
	for j < len(s) && !endsLiteral[s[j]] {
		j++
	}
	return j
}

// endsLiteral marks the bytes that end a number, true, false or null.
var endsLiteral = [256]bool{',': true, '}': true, ']': true, ' ': true, '\n': true, '\r': true, '\t': true}
