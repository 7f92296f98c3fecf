// Package router compiles route specs into an immutable table and matches
// requests against it without allocating.
//
// Compile once, off the event loops, and share the *Table between loops:
//
//	table, err := router.Compile([]router.Spec{
//		{Path: "/api/echo"},                              // 0: exact
//		{Path: "/api/*/items", Methods: []string{"GET"}}, // 1: one-segment wildcard
//		{Path: "/files/**"},                              // 2: multi-segment wildcard
//		{Prefix: "/"},                                    // 3: catch-all
//	})
//	...
//	scratch := make([]byte, 0, maxURI) // one per loop
//	r := table.Match(host, method, path, scratch)
//	switch {
//	case r.Found: // r.Index indexes the specs (its slot, once With edited the table); path[r.Matched:] is what the route did not cover
//	case r.Allow != "": // 405, with header "Allow: " + r.Allow
//	default: // 404
//	}
//
// Only registered routes are reachable.
//
// # Input
//
// The engine normalises the request before routing, and the same path is
// what goes upstream: dot segments removed, "//" merged, unreserved %XX
// decoded and other hex upper-cased ("%2F" stays an escape, never a
// separator); Host lowercased, port and trailing dot removed, IPv6
// bracketed ("[::1]"). The router does not repeat that work, so a caller
// passing a raw path gets "//" treated as an empty segment and "." and ".."
// as plain segments.
//
// # Matching copy of the path
//
// Matching (never forwarding) uses a copy of the path in which:
//   - ASCII letters are lowercased, so "/API/Echo" matches "/api/echo".
//     Every route kind (exact, "*", "**" and prefix) follows this one rule;
//   - one trailing slash is ignored, so "/api/echo/" matches "/api/echo",
//     but "/" stays "/" and "/api/echo//" does not match;
//   - path parameters are removed: each segment's ";..." up to the next
//     '/' is dropped, as servlet containers such as Tomcat do, so
//     "/admin;jsessionid=1/y" is matched as "/admin/y" and a "/admin/"
//     route (with its auth) applies to it. When a path has parameters the
//     stripped path is then normalised again, as such a container does:
//     empty and "." segments are dropped and ".." removes the segment
//     before it, so "/public/..;/admin/x" and "/;x/admin/x" are matched as
//     "/admin/x", the path the container would serve.
//
// A path that does not start with '/' (the "*" of OPTIONS, an absolute URI)
// matches nothing. Spec paths and prefixes are lowercased and lose one
// trailing slash at compile time; a spec containing ';' is rejected, since
// no request can match it.
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
// Classes are tried in this order:
//
//  1. exact paths (one map lookup, in the map the path's hash picks);
//  2. patterns containing only "*";
//  3. patterns containing "**";
//  4. prefixes, longest first.
//
// Within a pattern class, the segment trie is walked left to right trying a
// literal segment before "*" before "**", so "/api/v1/*" beats "/api/*/items"
// for "/api/v1/items". Among prefixes the one with more segments wins.
//
// Several specs may share a path; together they are that path's
// candidates. A candidate whose Host is set and differs from the request
// host does not count: if no candidate accepts the host, the path did not
// match, and the search goes on to the next alternative in the trie, the
// next shorter prefix or the next class. The first path (in the order
// above) with a candidate accepting the host decides the request:
//
//   - among its host-accepting candidates, those whose Host equals the
//     request host come before host-less ones, then those with Methods
//     before any-method ones, then spec order; the first that accepts the
//     method is chosen;
//   - if none accepts the method, the answer is 405 Method Not Allowed:
//     Result.Allow is the sorted union of those candidates' methods
//     ("GET, HEAD, POST"), and no less specific route is tried. A
//     method-restricted route therefore never hands its other methods to a
//     broader pattern or a catch-all prefix.
//
// For example, with {Path: "/m/secret", Methods: [GET, POST]} and
// {Prefix: "/"}, PUT /m/secret is a 405 with Allow "GET, HEAD, POST", while
// the same spec with Host "a.test" leaves PUT /m/secret from any other host
// to the catch-all.
//
// # Methods
//
// Methods are uppercased at compile time and compared case-sensitively, as
// HTTP requires. A spec with no Methods accepts every method. GET implies
// HEAD: Methods [GET] accepts HEAD and its Allow lists HEAD (so [GET] and
// [GET, HEAD] on one path are duplicates); HEAD alone does not admit GET.
//
// # Hosts
//
// Spec hosts are lowercased, lose one trailing dot ("admin.test." is
// "admin.test") and may write an IPv6 literal with or without brackets
// ("::1" and "[::1]" both match request host "[::1]"). They must not carry
// a port. The request host is compared ASCII case-insensitively; a port,
// a trailing dot and a bare IPv6 literal are tolerated there too.
//
// # Matched
//
// Result.Matched says how much of the path passed to Match (not the
// matching copy) the route covered. For exact and wildcard routes it is
// len(path). For a prefix it ends where the input segment that matched the
// prefix's last segment ends, parameters included, so path[Matched:] is
// empty or starts with '/': prefix "/rw/" gives 3 for "/RW/v1/users" and 7
// for "/rw;v=2/v1"; prefix "/" gives 0.
package router
