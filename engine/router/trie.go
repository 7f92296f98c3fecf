// Segment trie shared by the wildcard classes and the prefix class.

package router

import "strings"

// node is one path segment position in a trie. The root stands for "/".
type node struct {
	literal map[string]*node // child per literal segment
	star    *node            // child for a "*" segment
	routes  routeSet         // specs whose pattern ends at this node
	rest    routeSet         // specs whose pattern is this node's path + "/**"
}

// insert adds cand under pattern (normalised, starting with '/') and
// returns the possibly newly created root.
func (n *node) insert(pattern string, cand candidate) *node {
	if n == nil {
		n = &node{}
	}
	cur := n
	if pattern != "/" {
		for _, seg := range strings.Split(pattern[1:], "/") {
			switch seg {
			case "**":
				cur.rest = append(cur.rest, cand)
				return n
			case "*":
				if cur.star == nil {
					cur.star = &node{}
				}
				cur = cur.star
			default:
				if cur.literal == nil {
					cur.literal = make(map[string]*node)
				}
				next := cur.literal[seg]
				if next == nil {
					next = &node{}
					cur.literal[seg] = next
				}
				cur = next
			}
		}
	}
	cur.routes = append(cur.routes, cand)
	return n
}

// walk calls f on every node of the trie.
func (n *node) walk(f func(*node)) {
	if n == nil {
		return
	}
	f(n)
	for _, child := range n.literal {
		child.walk(f)
	}
	n.star.walk(f)
}

// match finds a pattern route for the segments in rest. rest is the path
// after the '/' that ends the segments already consumed; end is true when
// no segment is left. At each level it tries the literal child, then "*",
// then "**", backtracking only while a subtree has no route accepting the
// request's host. The first path whose routes accept the host decides (see
// routeSet.pick for index, allow and hit): a method mismatch there is a
// 405, not a reason to try a less specific pattern.
func (n *node) match(rest []byte, end bool, host, method []byte) (index int, allow string, hit bool) {
	if n == nil {
		return -1, "", false
	}
	if end {
		return n.routes.pick(host, method)
	}
	seg, tail, last := cutSegment(rest)
	if child := n.literal[string(seg)]; child != nil {
		if i, a, ok := child.match(tail, last, host, method); ok {
			return i, a, true
		}
	}
	if n.star != nil && len(seg) > 0 {
		if i, a, ok := n.star.match(tail, last, host, method); ok {
			return i, a, true
		}
	}
	if len(n.rest) > 0 && len(rest) > 0 {
		return n.rest.pick(host, method)
	}
	return -1, "", false
}

// longest finds the deepest prefix node along rest (see match for rest and
// end) that has a route accepting the request's host, backing off toward
// the root, and decides there as match does. depth counts the segments
// consumed to reach n, and is returned for the deciding node.
func (n *node) longest(rest []byte, end bool, depth int, host, method []byte) (index int, allow string, at int, hit bool) {
	if n == nil {
		return -1, "", 0, false
	}
	if !end {
		seg, tail, last := cutSegment(rest)
		if child := n.literal[string(seg)]; child != nil {
			if i, a, d, ok := child.longest(tail, last, depth+1, host, method); ok {
				return i, a, d, true
			}
		}
	}
	index, allow, hit = n.routes.pick(host, method)
	return index, allow, depth, hit
}

// cutSegment splits rest at its first '/': seg before it, tail after it.
// last reports that seg was the final segment.
func cutSegment(rest []byte) (seg, tail []byte, last bool) {
	for i, c := range rest {
		if c == '/' {
			return rest[:i], rest[i+1:], false
		}
	}
	return rest, nil, true
}
