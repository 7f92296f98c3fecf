// Package respbody is the response_body filter: it rewrites a route's
// JSON response bodies (masks or removes fields by path, wraps the body in
// an envelope, replaces the body of given statuses), and lets every
// response it cannot rewrite safely stream through untouched.
//
// The engine holds a body the filter asks for (filters.BodyFilter) up to
// max_bytes and sends the result with a Content-Length. The decision is
// made from the head alone: a Content-Length over max_bytes, a type not
// listed, or a Content-Encoding other than identity streams from the first
// byte. A body of unknown length that outgrows max_bytes (or the process's
// max_buffered_bytes) streams after all, the bytes held first. A body that
// is not valid JSON (sonic validates it) goes out as it came. Each of
// these outcomes is counted (loopgate_response_body_total).
//
// Editing is one pass over the validated body that copies the untouched
// spans and writes the edits between them, into a pooled buffer: no
// allocation per response (sonic's ast, which edits through a tree of
// nodes, allocates per node; see BenchmarkSonicAST).
package respbody
