// Package codec parses HTTP/1.1 message heads and walks chunked bodies for the gateway's event loops.
//
// Its one job is to turn bytes as they arrive into framing facts (method, target, headers, body
// length, keep-alive) without copying and without allocating, and to refuse anything ambiguous
// enough to smuggle a second request past the proxy.
//
// # Use
//
// Parsing works on whatever bytes have arrived. Call it again with the grown buffer until it
// reports a complete head:
//
//	var req codec.Request // one per connection; ParseRequest resets it but keeps the Headers capacity
//	n, err := codec.ParseRequest(buf, &req, &limits)
//	switch {
//	case err != nil:
//		e := err.(*codec.Error) // every error is a *codec.Error
//		// answer e.Status with JSON code e.Code, then close the connection
//	case n == 0:
//		// need more bytes: keep buf and call again when it has grown
//	default:
//		// buf[:n] is the head; the body (req.ContentLength bytes, or chunked) starts at buf[n]
//	}
//
// Every []byte in Request, Response and Header is a view into buf, valid until buf changes.
// ParseRequest re-parses from the start of buf on every call; the limits keep that bounded.
// A pipelined second request starts at buf[n].
//
// Responses are parsed the same way with ParseResponse; Response.BodyMode then says how the body
// ends. A chunked body is walked with a ChunkedDecoder:
//
//	dec.Reset(limits.MaxBodyBytes) // once per body; then, each time bytes arrive in src:
//	for len(src) > 0 && !dec.Done() {
//		n, data, _, err := dec.Next(src)
//		if err != nil {
//			// 400 (or 502 for an upstream body), then close
//		}
//		// forward src[:n] verbatim (pass-through) or data (decoding)
//		src = src[n:]
//	}
//	// dec.Done(): the body is over and src holds what follows it; otherwise wait for more bytes
//
// Next returns right after the last-chunk line, so a caller that asks InTrailers before each call
// knows that src[:n] is trailer section; ForEachTrailer walks the collected section and
// ForbiddenTrailer names the fields a proxy must not forward there. AppendChunkHeader and LastChunk
// re-frame a close-delimited body as chunked.
//
// # Normalisation
//
// Routing must see one spelling per resource, and the same bytes must go upstream (normalise once,
// before anything decides). NormalizePath decodes %-escapes of unreserved characters, upper-cases the
// other escapes, merges repeated slashes and removes dot segments, refusing a ".." above the root;
// it keeps %2F, %5C and a raw backslash (as %5C) but reports them in PathFlags, and the caller answers
// 400 unless the route opted in. NormalizeHost lower-cases the Host, drops one trailing dot and splits
// off the port. Both append to a caller's buffer and do not allocate when it is large enough. Their
// errors are 400/40001: ErrBadPercent, ErrNulInPath, ErrPathAboveRoot, ErrBadTarget and ErrBadHost.
//
// # Request rules
//
// Violations answer 400 with code 40001 unless stated; each has its own sentinel (see errors.go).
//
//   - Line endings must be CRLF; a bare LF or bare CR is rejected (ErrMalformed).
//   - Empty lines before the request line are skipped and counted in n (RFC 9112 2.2).
//   - Request line: exactly "method SP request-target SP version", single spaces (ErrBadRequestLine).
//   - Method is a token (RFC 9110 tchar), case-sensitive.
//   - Request-target holds no control character, space, DEL or '#' (ErrBadTarget); bytes >= 0x80
//     are tolerated. It must be origin-form ("/path?query"), absolute-form with scheme http or
//     https ("http://host/path": Path is "/path", "/" when empty, and Host is the authority,
//     which must be a valid host[:port] without userinfo), or "*" with OPTIONS (ErrBadTarget).
//   - CONNECT (authority-form) is not proxied: ErrConnectNotSupported (400).
//   - Target longer than Limits.MaxURIBytes: ErrURITooLong (414/41401).
//   - Version is exactly "HTTP/1.0" or "HTTP/1.1" (ErrBadVersion); the HTTP/2 preface
//     "PRI * HTTP/2.0" is rejected by this rule.
//   - Field name is a non-empty token (ErrBadHeaderName); whitespace before the colon is
//     ErrSpaceBeforeColon; a line starting with SP or HTAB is obs-fold (ErrObsFold); a line
//     without a colon is ErrMalformed.
//   - Field value may hold HTAB, SP, visible ASCII and bytes >= 0x80, nothing else (ErrBadHeaderValue).
//     Surrounding OWS is trimmed from Header.Value.
//   - More than Limits.MaxHeaderCount fields, or a head (leading empty lines included) longer than
//     Limits.MaxHeaderBytes: ErrHeadersTooLarge (431/43101).
//   - Content-Length is 1 to 18 digits, or a comma list of such values that are all equal; repeated
//     Content-Length fields must agree. Anything else is ErrBadContentLength. Identical duplicates are
//     accepted and remain in Headers, so a forwarder must emit a single Content-Length of its own.
//   - Content-Length greater than Limits.MaxBodyBytes: ErrBodyTooLarge (413/41301).
//   - Transfer-Encoding must be one field whose value is "chunked" (any case, OWS trimmed); anything
//     else, including "gzip, chunked" or two fields, is ErrUnknownTransferEncoding.
//   - Both Content-Length and Transfer-Encoding: ErrCLandTE. Transfer-Encoding in HTTP/1.0:
//     ErrTransferEncodingHTTP10.
//   - HTTP/1.1 requires exactly one Host field (ErrMissingHost, ErrDuplicateHost); its value must be
//     empty or a valid host[:port] (ErrBadHost): dot-separated non-empty labels (one trailing dot
//     allowed) or a bracketed IPv6 address, no percent-encoding, and a port of 1-5 digits up to 65535.
//     An absolute-form authority follows the same grammar (ErrBadTarget); NormalizeHost accepts exactly it.
//   - KeepAlive: HTTP/1.1 unless Connection lists "close"; HTTP/1.0 only if it lists "keep-alive".
//     Upgrade: HTTP/1.1, Connection lists "upgrade" and an Upgrade field exists. ExpectContinue:
//     HTTP/1.1 with "Expect: 100-continue". HTTP/1.0 ignores Upgrade and Expect (RFC 9110).
//
// Limits hold on partial input too: a request line whose target already exceeds MaxURIBytes, or a
// buffer of MaxHeaderBytes without the end of the head, fails at once, and so does a partial request
// line that can no longer become valid (a bad method byte, a version that is not a prefix of HTTP/1.x).
//
// # Response rules
//
// ParseResponse applies the field rules above except the request-only ones (Host, Expect,
// MaxBodyBytes), and every failure is 502: ErrResponseHeadTooLarge (50203) for the count and size
// limits, ErrBadResponse (50202) for anything else.
//
//   - Empty lines before the status line, CRLF or a bare LF, are skipped (as nginx and haproxy do),
//     counted in n and in MaxHeaderBytes, but not in HeadLen.
//   - Status line: "HTTP/1.0" or "HTTP/1.1", SP, three digits 100-599, then SP and a reason phrase
//     (possibly empty) or nothing at all.
//   - Both Content-Length and Transfer-Encoding, Transfer-Encoding other than a single "chunked", or
//     Transfer-Encoding in HTTP/1.0 are ErrBadResponse. RFC 9112 would allow reading such a body until
//     close; refusing is simpler and closes a response-splitting door.
//   - BodyMode (RFC 9112 6.3): responses to HEAD, 1xx, 204 and 304 have no body; then chunked; then
//     Content-Length (0 is no body); otherwise the body runs until the upstream closes.
//
// # Chunked rules
//
//   - chunk-size is 1 to 16 hex digits and fits in int64. Extensions are *( ";" token [ "=" ( token /
//     quoted-string ) ] ) with no whitespace anywhere (RFC 9112's BWS is refused: parsers disagree on
//     it), validated and skipped; the size line is bounded to 4 KiB. Violations: ErrBadChunk.
//   - Each chunk's data ends in CRLF. The sum of sizes beyond the Reset limit is ErrBodyTooLarge,
//     detected as soon as a size is read.
//   - Trailer fields are "token: value" lines ending in CRLF, 16 KiB in total, then a final CRLF.
//     They are consumed (and included in n for pass-through) but not returned as data; InTrailers marks
//     them so a caller can forward or drop the section.
//   - A bare LF anywhere in the framing is ErrBadChunk.
//   - ErrBadChunk is 400; a caller decoding an upstream body answers 502 instead.
//
// # Concurrency and allocation
//
// Functions keep no global mutable state. A Request, Response or ChunkedDecoder belongs to one
// goroutine. Nothing allocates in steady state: Headers grow only while a connection sees more fields
// than before, and errors are preallocated sentinels.
package codec
