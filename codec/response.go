// Response heads: the Response view type, ParseResponse, and body framing (BodyMode).

package codec

import "bytes"

// Response is a parsed upstream response head. Every []byte field is a view into the buffer given to
// ParseResponse and is valid only while that buffer is unchanged. A Response is owned by one goroutine
// (the event loop of the client connection it answers); it is not safe for concurrent use.
type Response struct {
	Minor  int    // HTTP minor version: 0 or 1
	Status int    // 100..599
	Reason []byte // reason phrase, possibly empty

	Headers Headers // all field lines in order; capacity survives Reset
	HeadLen int     // bytes of the head from the status line through the final CRLF (skipped empty lines excluded)

	ContentLength int64 // -1 when absent
	Chunked       bool  // Transfer-Encoding: chunked
	// KeepAlive is what the version and Connection header say: HTTP/1.1 unless Connection: close,
	// HTTP/1.0 only with Connection: keep-alive. A BodyUntilClose body ends the connection regardless.
	KeepAlive bool
	// ConnectionNames is set when a Connection field names a field that is not hop-by-hop already:
	// a proxy drops the fields it names.
	ConnectionNames bool
}

// Reset clears r for the next response, keeping the Headers capacity.
func (r *Response) Reset() {
	*r = Response{Headers: r.Headers[:0], ContentLength: -1}
}

// ParseResponse parses one response head from the start of buf into r (which it resets first).
//
// It returns the bytes consumed, including empty lines skipped before the status line, and nil when the
// head is complete; (0, nil) when more bytes are needed; or (0, err) where err is ErrResponseHeadTooLarge
// (502/50203) when lim.MaxHeaderCount or lim.MaxHeaderBytes is exceeded, those skipped lines counting
// toward the latter, and ErrBadResponse (502/50202) for anything malformed. The field rules are those of
// ParseRequest, without the request-only ones (Host, Expect, body size). Both Content-Length and
// Transfer-Encoding, or any Transfer-Encoding but a single "chunked", is ErrBadResponse: RFC 9112 would
// let the response be read until close, but such upstreams are broken or hostile and failing is safer.
// 1xx responses are parsed like any other; the caller loops past 100 Continue and handles 101.
// lim may be nil for the defaults. Safe for concurrent use on distinct Responses.
func ParseResponse(buf []byte, r *Response, lim *Limits) (n int, err error) {
	r.Reset()
	l := effectiveLimits(lim)

	// Empty lines before the status line: RFC 9112 2.2 lets a recipient skip them, and some upstreams
	// send a stray CRLF after a body, which nginx and haproxy tolerate too. A bare LF is accepted here
	// only; a CR must be followed by LF. They count toward MaxHeaderBytes.
	pos := 0
	for pos < len(buf) && (buf[pos] == '\r' || buf[pos] == '\n') {
		if buf[pos] == '\r' {
			if pos+1 >= len(buf) {
				return responseError(needMoreHead(buf, &l))
			}
			if buf[pos+1] != '\n' {
				return 0, ErrBadResponse
			}
			pos++
		}
		pos++
		if pos >= l.MaxHeaderBytes {
			return 0, ErrResponseHeadTooLarge // the status line cannot fit any more
		}
	}
	start := pos

	nl := bytes.IndexByte(buf[pos:], '\n')
	if nl < 0 {
		line := buf[pos:]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if !parseStatusLine(line, false, r) {
			return 0, ErrBadResponse
		}
		return responseError(needMoreHead(buf, &l))
	}
	lineEnd := pos + nl
	if nl == 0 || buf[lineEnd-1] != '\r' || !parseStatusLine(buf[pos:lineEnd-1], true, r) {
		return 0, ErrBadResponse
	}
	if lineEnd+1 > l.MaxHeaderBytes {
		return 0, ErrResponseHeadTooLarge
	}

	fs := fieldState{contentLength: -1}
	end, err := parseFields(buf, lineEnd+1, &l, &fs, &r.Headers)
	if end == 0 || err != nil {
		return responseError(0, err)
	}
	if fs.teSeen && (fs.contentLength >= 0 || r.Minor == 0) {
		return 0, ErrBadResponse
	}
	r.HeadLen = end - start
	r.ContentLength = fs.contentLength
	r.Chunked = fs.teSeen
	r.ConnectionNames = fs.connNames
	if r.Minor == 1 {
		r.KeepAlive = !fs.connClose
	} else {
		r.KeepAlive = fs.connKeepAlive && !fs.connClose
	}
	return end, nil
}

// responseError maps a request-side parse error to its 502 counterpart.
func responseError(n int, err error) (int, error) {
	switch err {
	case nil:
		return n, nil
	case ErrHeadersTooLarge:
		return 0, ErrResponseHeadTooLarge
	}
	return 0, ErrBadResponse
}

// parseStatusLine parses "HTTP/1.x SP 3DIGIT [SP reason-phrase]" (CRLF already removed).
// A missing SP after the status code is tolerated. When complete is false, line is a prefix
// and only what has arrived is checked.
func parseStatusLine(line []byte, complete bool, r *Response) bool {
	const versionLen = len("HTTP/1.1")
	minor, ok := parseVersion(line[:min(len(line), versionLen)], complete && len(line) < versionLen)
	if !ok {
		return false
	}
	if len(line) <= versionLen {
		return !complete
	}
	if line[versionLen] != ' ' {
		return false
	}
	code := line[versionLen+1:]
	status := 0
	for k := 0; k < len(code) && k < 3; k++ {
		c := code[k]
		if c < '0' || c > '9' || (k == 0 && (c < '1' || c > '5')) {
			return false
		}
		status = status*10 + int(c-'0')
	}
	if len(code) < 3 {
		return !complete
	}
	var reason []byte
	if len(code) > 3 {
		if code[3] != ' ' {
			return false
		}
		reason = code[4:]
		for _, c := range reason {
			if !valueTable[c] {
				return false
			}
		}
	}
	if complete {
		r.Minor, r.Status, r.Reason = minor, status, reason
	}
	return true
}

// BodyMode says how a message body is delimited (RFC 9112 6.3).
type BodyMode uint8

const (
	BodyNone       BodyMode = iota // no body: HEAD, 1xx, 204, 304, or Content-Length: 0
	BodyLength                     // exactly ContentLength bytes follow
	BodyChunked                    // chunked; walk it with a ChunkedDecoder
	BodyUntilClose                 // the body ends when the upstream closes; the connection cannot be reused
)

// String returns the mode's name.
func (m BodyMode) String() string {
	switch m {
	case BodyNone:
		return "none"
	case BodyLength:
		return "length"
	case BodyChunked:
		return "chunked"
	case BodyUntilClose:
		return "until-close"
	}
	return "BodyMode(?)"
}

// BodyMode applies RFC 9112 6.3 to r: responses to HEAD and 1xx, 204 and 304 responses have no body
// whatever their headers say; then chunked, then Content-Length (0 means none), else until close.
func (r *Response) BodyMode(requestWasHEAD bool) BodyMode {
	switch {
	case requestWasHEAD || r.Status < 200 || r.Status == 204 || r.Status == 304:
		return BodyNone
	case r.Chunked:
		return BodyChunked
	case r.ContentLength == 0:
		return BodyNone
	case r.ContentLength > 0:
		return BodyLength
	}
	return BodyUntilClose
}
