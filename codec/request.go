// Request heads: the Request view type and ParseRequest.

package codec

import "bytes"

// Request is a parsed request head. Every []byte field is a read-only view into the buffer given to
// ParseRequest (or, for Path "/", a shared constant) and is valid only while that buffer is unchanged.
// A Request is owned by one
// goroutine (the connection's event loop); it is not safe for concurrent use.
type Request struct {
	Method []byte // token, case-sensitive as received
	URI    []byte // raw request-target
	Path   []byte // path part: URI before '?', or the path of an absolute-form target ("/" if it has none), or "*"
	Query  []byte // after the first '?', without it; empty when there is none
	Minor  int    // HTTP minor version: 0 or 1

	Headers Headers // all field lines in order; capacity survives Reset
	HeadLen int     // bytes of the head from the request line through the final CRLF (skipped empty lines excluded)

	// Host is the Host header value, or for an absolute-form target its authority (which overrides the
	// Host header, RFC 9112 3.2.2; the Host field in Headers keeps the received value).
	Host []byte

	// What the parser found while it checked Host (see NormalHost): the name as received, without its
	// port; the port, -1 when absent; whether the name has an upper-case letter.
	hostName  []byte
	hostPort  int
	hostUpper bool

	ContentLength  int64 // -1 when absent
	Chunked        bool  // Transfer-Encoding: chunked
	KeepAlive      bool  // HTTP/1.1 unless Connection: close; HTTP/1.0 only with Connection: keep-alive
	Upgrade        bool  // HTTP/1.1, Connection lists "upgrade" and an Upgrade header is present
	ExpectContinue bool  // HTTP/1.1 with Expect: 100-continue
	// ConnectionNames is set when a Connection field names a field that is not hop-by-hop already
	// (close and keep-alive are not fields; an extension's header is): a proxy drops the fields it names.
	ConnectionNames bool
	TETrailers      bool // a TE field lists "trailers" (RFC 9110 10.1.4)
}

// Reset clears r for the next request, keeping the Headers capacity so steady-state parsing does not allocate.
func (r *Request) Reset() {
	*r = Request{Headers: r.Headers[:0], ContentLength: -1, hostPort: -1}
}

// HasBody reports whether a request body follows the head.
func (r *Request) HasBody() bool { return r.Chunked || r.ContentLength > 0 }

// IsHEAD reports whether the method is HEAD, whose response never has a body (see Response.BodyMode).
func (r *Request) IsHEAD() bool { return string(r.Method) == "HEAD" }

// slashPath is the Path of an absolute-form target without a path. It is shared and must not be modified.
var slashPath = []byte{'/'}

// ParseRequest parses one request head from the start of buf into r (which it resets first).
//
// It returns the number of bytes consumed, including skipped leading empty lines, and nil when the head
// is complete; (0, nil) when more bytes are needed; or (0, err) with err one of the package's *Error
// sentinels. Limits are enforced on partial input as well, so a caller never buffers more than
// lim.MaxHeaderBytes waiting for a head. lim may be nil for the defaults. It does not allocate once
// r.Headers has grown to the field count seen. Safe for concurrent use on distinct Requests.
func ParseRequest(buf []byte, r *Request, lim *Limits) (n int, err error) {
	r.Reset()
	l := effectiveLimits(lim)

	pos := 0
	for pos < len(buf) && buf[pos] == '\r' { // leading empty lines (RFC 9112 2.2)
		if pos+1 >= len(buf) {
			return needMoreHead(buf, &l)
		}
		if buf[pos+1] != '\n' {
			return 0, ErrMalformed
		}
		pos += 2
	}
	start := pos

	nl := bytes.IndexByte(buf[pos:], '\n')
	if nl < 0 {
		line := buf[pos:]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1] // may be the CR of the CRLF still to come
		}
		if err := parseRequestLine(line, false, r, &l); err != nil {
			return 0, err
		}
		return needMoreHead(buf, &l)
	}
	lineEnd := pos + nl
	if nl == 0 || buf[lineEnd-1] != '\r' {
		return 0, ErrMalformed // bare LF
	}
	if err := parseRequestLine(buf[pos:lineEnd-1], true, r, &l); err != nil {
		return 0, err
	}
	if lineEnd+1 > l.MaxHeaderBytes {
		return 0, ErrHeadersTooLarge
	}

	fs := fieldState{isRequest: true, contentLength: -1, hostPort: -1}
	end, err := parseFields(buf, lineEnd+1, &l, &fs, &r.Headers)
	if end == 0 || err != nil {
		return 0, err
	}
	if err := r.applyFields(&fs, &l); err != nil {
		return 0, err
	}
	r.HeadLen = end - start
	return end, nil
}

// applyFields checks the cross-field rules and fills the framing and connection fields.
func (r *Request) applyFields(fs *fieldState, l *Limits) error {
	if fs.teSeen && fs.contentLength >= 0 {
		return ErrCLandTE
	}
	if fs.teSeen && r.Minor == 0 {
		return ErrTransferEncodingHTTP10
	}
	if r.Minor == 1 && fs.hostCount == 0 {
		return ErrMissingHost
	}
	if fs.contentLength > l.MaxBodyBytes {
		return ErrBodyTooLarge
	}
	if r.Host == nil { // not set by an absolute-form target
		r.Host, r.hostName, r.hostPort, r.hostUpper = fs.host, fs.hostName, fs.hostPort, fs.hostUpper
	}
	r.ContentLength = fs.contentLength
	r.Chunked = fs.teSeen
	r.ConnectionNames, r.TETrailers = fs.connNames, fs.teTrailers
	if r.Minor == 1 {
		r.KeepAlive = !fs.connClose
		r.Upgrade = fs.connUpgrade && fs.upgradeSeen
		r.ExpectContinue = fs.expectContinue
	} else {
		r.KeepAlive = fs.connKeepAlive && !fs.connClose
	}
	return nil
}

// parseRequestLine parses "method SP request-target SP HTTP-version" (CRLF already removed).
// When complete is false, line is what has arrived so far: it is checked left to right as far as it goes,
// so an input that fails here fails the same way once complete.
func parseRequestLine(line []byte, complete bool, r *Request, l *Limits) error {
	i := 0
	for i < len(line) && tcharTable[line[i]] {
		i++
	}
	if i == len(line) {
		if complete {
			return ErrBadRequestLine
		}
		return nil
	}
	if i == 0 || line[i] != ' ' {
		return ErrBadRequestLine
	}

	t := i + 1
	j := t
	stop := min(len(line), t+l.MaxURIBytes+1)
	for j < stop && line[j] != ' ' {
		if !targetTable[line[j]] {
			return ErrBadTarget
		}
		j++
	}
	if j-t > l.MaxURIBytes {
		return ErrURITooLong
	}
	if j == len(line) {
		if complete {
			return ErrBadRequestLine
		}
		return nil
	}
	if j == t {
		return ErrBadRequestLine // empty target (double space)
	}

	minor, ok := parseVersion(line[j+1:], complete)
	if !ok {
		return ErrBadVersion
	}
	if !complete {
		return nil
	}
	r.Method, r.URI, r.Minor = line[:i], line[t:j], minor
	return r.splitTarget()
}

// parseVersion accepts exactly "HTTP/1.0" or "HTTP/1.1"; when complete is false, any prefix of them.
func parseVersion(v []byte, complete bool) (minor int, ok bool) {
	const proto = "HTTP/1.1"
	if len(v) > len(proto) || (complete && len(v) != len(proto)) {
		return 0, false
	}
	for k := range v {
		if v[k] != proto[k] && !(k == len(proto)-1 && v[k] == '0') {
			return 0, false
		}
	}
	if len(v) == len(proto) && v[len(v)-1] == '1' {
		minor = 1
	}
	return minor, true
}

// splitTarget classifies r.URI (RFC 9112 3.2) and fills Path, Query and, for absolute-form, Host.
func (r *Request) splitTarget() error {
	u := r.URI
	switch {
	case string(r.Method) == "CONNECT":
		return ErrConnectNotSupported
	case u[0] == '/':
		r.Path = u
	case len(u) == 1 && u[0] == '*':
		if string(r.Method) != "OPTIONS" {
			return ErrBadTarget
		}
		r.Path = u
		return nil
	default:
		rest, ok := cutSchemeFold(u)
		if !ok {
			return ErrBadTarget
		}
		a := 0
		for a < len(rest) && rest[a] != '/' && rest[a] != '?' {
			a++
		}
		if a == 0 {
			return ErrBadTarget
		}
		host, port, upper, ok := splitHost(rest[:a])
		if !ok {
			return ErrBadTarget
		}
		r.Host, r.hostName, r.hostPort, r.hostUpper = rest[:a], host, port, upper
		r.Path = rest[a:]
	}
	if q := bytes.IndexByte(r.Path, '?'); q >= 0 {
		r.Query = r.Path[q+1:]
		r.Path = r.Path[:q]
	}
	if len(r.Path) == 0 {
		r.Path = slashPath
	}
	return nil
}

// cutSchemeFold strips a leading "http://" or "https://" (any case) from u.
func cutSchemeFold(u []byte) (rest []byte, ok bool) {
	for _, scheme := range [...]string{"http://", "https://"} {
		if len(u) >= len(scheme) && EqualFold(u[:len(scheme)], scheme) {
			return u[len(scheme):], true
		}
	}
	return nil, false
}
