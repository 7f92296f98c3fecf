// Package router compiles route specs into an immutable table and matches
// requests against it without allocating.
//
// Compile once, off the event loops, and share the *Table between loops:
//
//	table, err := router.Compile([]router.Spec{
//		{Path: "/api/echo"},                          // 0: exact
//		{Path: "/api/*/items", Methods: []string{"GET"}}, // 1: one-segment wildcard
//		{Path: "/files/**"},                          // 2: multi-segment wildcard
//		{Prefix: "/"},                                // 3: catch-all
//	})
//	...
//	scratch := make([]byte, 0, maxURI) // one per loop
//	i, ok := table.Match(host, method, path, scratch) // i indexes the specs
//
// An unmatched request (ok == false) is a 404: only registered routes are
// reachable.
//
// # Normalisation
//
// Matching (never forwarding) uses a normalised copy of the path:
//   - ASCII letters are lowercased, so "/API/Echo" matches "/api/echo";
//   - one trailing slash is ignored, so "/api/echo/" matches "/api/echo",
//     but "/" stays "/".
//
// Nothing else is rewritten: no percent-decoding, no dot-segment removal,
// and "//" is an empty segment, not a separator to collapse. A path that does
// not start with '/' (the "*" of OPTIONS, an absolute URI) matches nothing.
// Spec paths and prefixes are normalised the same way at compile time.
//
// # Patterns
//
// A Path is exact unless one of its segments is "*" or "**":
//   - "*" matches exactly one non-empty segment: "/api/*/items" matches
//     "/api/v1/items" but not "/api/items" or "/api/a/b/items";
//   - "**" matches one or more segments and must be the last segment:
//     "/files/**" matches "/files/a" and "/files/a/b", not "/files".
//
// A '*' inside a segment ("/a*b") is a compile error.
//
// A Prefix matches on whole segments: "/static/" (or "/static") matches
// "/static", "/static/" and "/static/x", but not "/staticx". This differs
// from nginx's "location /static", which is a byte prefix and would match
// "/staticx"; segment matching cannot expose a sibling path by accident.
// Prefix "/" matches every path.
//
// # Precedence
//
// Classes are tried in this order, and the first class that yields a route
// wins:
//
//  1. exact paths (one map lookup);
//  2. patterns containing only "*";
//  3. patterns containing "**";
//  4. prefixes, longest first.
//
// Within a pattern class, the segment trie is walked left to right trying a
// literal segment before "*" before "**", so "/api/v1/*" beats "/api/*/items"
// for "/api/v1/items". Among prefixes the one with more segments wins.
//
// Several specs may share a path. Among them, those whose Host equals the
// request host come before host-less ones, then those with Methods come
// before any-method ones, then spec order. The first whose host and method
// both match is chosen. If none does, matching continues with the next
// alternative in the trie and then the next class, so a host- or
// method-restricted exact route falls back to a broader pattern or prefix.
//
// Hosts compare ASCII case-insensitively against the request Host with its
// port removed ("Example.com:8080" matches Host "example.com"); IPv6
// literals may be written with or without brackets. Methods are uppercased
// at compile time and compared case-sensitively, as HTTP requires.
package router
