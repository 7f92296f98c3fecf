// Errors returned by the parsers and the chunked decoder, with their HTTP status and JSON error code.

package codec

// Error is a parse or limit failure. It carries what the proxy answers with:
// Status is the HTTP status code and Code the JSON error code (status*100 + detail).
//
// Every Error the package returns is one of the package-level sentinels below,
// so callers may compare with == or errors.Is. Errors are immutable and safe for
// concurrent use; never modify a sentinel.
type Error struct {
	Status  int    // HTTP status to answer with, e.g. 400
	Code    int    // JSON error code, e.g. 40001
	Message string // short, fixed, safe to send to the client
}

var _ error = (*Error)(nil)

// Error returns the message. It does not allocate.
func (e *Error) Error() string { return e.Message }

func malformed(msg string) *Error { return &Error{Status: 400, Code: 40001, Message: msg} }

// Request errors: 400 / 40001 unless noted.
var (
	// ErrMalformed is the generic framing error: bare CR or LF, a header line without a colon.
	ErrMalformed = malformed("malformed request")
	// ErrBadRequestLine: the request line is not "method SP target SP version CRLF" or the method is not a token.
	ErrBadRequestLine = malformed("malformed request line")
	// ErrBadTarget: the request-target is not origin-form, absolute-form (http/https) or "*" for OPTIONS,
	// or it holds a control character, space or '#'.
	ErrBadTarget = malformed("invalid request target")
	// ErrConnectNotSupported: CONNECT (authority-form) is not proxied.
	ErrConnectNotSupported = malformed("CONNECT not supported")
	// ErrBadVersion: the version is not exactly HTTP/1.0 or HTTP/1.1 (this includes the HTTP/2 preface).
	ErrBadVersion = malformed("unsupported HTTP version")
	// ErrBadHeaderName: a field name is empty or holds a byte that is not a token character.
	ErrBadHeaderName = malformed("invalid header name")
	// ErrSpaceBeforeColon: whitespace between a field name and its colon (RFC 9112 5.1).
	ErrSpaceBeforeColon = malformed("whitespace before header colon")
	// ErrObsFold: a field line starts with SP or HTAB (obsolete line folding, RFC 9112 5.2).
	ErrObsFold = malformed("obsolete header line folding")
	// ErrBadHeaderValue: a field value holds a control character other than HTAB.
	ErrBadHeaderValue = malformed("invalid header value")
	// ErrCLandTE: both Content-Length and Transfer-Encoding are present (request smuggling).
	ErrCLandTE = malformed("both Content-Length and Transfer-Encoding")
	// ErrBadContentLength: Content-Length is not all digits, overflows, or holds differing values.
	ErrBadContentLength = malformed("invalid Content-Length")
	// ErrUnknownTransferEncoding: Transfer-Encoding is anything but a single "chunked".
	ErrUnknownTransferEncoding = malformed("unsupported Transfer-Encoding")
	// ErrTransferEncodingHTTP10: an HTTP/1.0 request carries Transfer-Encoding (RFC 9112 6.1).
	ErrTransferEncodingHTTP10 = malformed("Transfer-Encoding in HTTP/1.0 request")
	// ErrMissingHost: an HTTP/1.1 request without a Host header.
	ErrMissingHost = malformed("missing Host header")
	// ErrDuplicateHost: more than one Host header.
	ErrDuplicateHost = malformed("duplicate Host header")
	// ErrBadHost: the Host header (or the authority of an absolute-form target) is not a valid host[:port].
	ErrBadHost = malformed("invalid Host")
	// ErrBadChunk: invalid chunked framing: chunk size, CRLF after data, extension or trailer section.
	// When decoding an upstream response body the caller answers 502 instead.
	ErrBadChunk = malformed("invalid chunked encoding")
	// ErrBadPercent: NormalizePath met a '%' not followed by two hex digits.
	ErrBadPercent = malformed("invalid percent-encoding in path")
	// ErrNulInPath: NormalizePath met %00, which some upstreams read as the end of the path.
	ErrNulInPath = malformed("encoded NUL in path")
	// ErrPathAboveRoot: a ".." segment would climb above "/". Clamping it to "/" (as RFC 3986 does)
	// would hand the upstream a path the client never meant; refusing keeps traversal probes visible.
	ErrPathAboveRoot = malformed("path climbs above the root")

	// ErrURITooLong: the request-target is longer than Limits.MaxURIBytes.
	ErrURITooLong = &Error{Status: 414, Code: 41401, Message: "URI too long"}
	// ErrHeadersTooLarge: more than Limits.MaxHeaderCount fields or Limits.MaxHeaderBytes of head.
	ErrHeadersTooLarge = &Error{Status: 431, Code: 43101, Message: "request header fields too large"}
	// ErrBodyTooLarge: Content-Length, or the sum of chunk sizes, exceeds Limits.MaxBodyBytes.
	ErrBodyTooLarge = &Error{Status: 413, Code: 41301, Message: "request body too large"}
)

// Response errors: 502. A malformed upstream response is never the client's fault.
var (
	// ErrBadResponse (502/50202): any malformed upstream response head.
	ErrBadResponse = &Error{Status: 502, Code: 50202, Message: "bad response from upstream"}
	// ErrResponseHeadTooLarge (502/50203): the upstream head exceeds Limits.MaxHeaderCount or
	// Limits.MaxHeaderBytes. It has its own code because the fix differs: the head may be well formed,
	// and an operator raises the limits (or fixes the upstream) rather than looking for a broken peer.
	ErrResponseHeadTooLarge = &Error{Status: 502, Code: 50203, Message: "upstream response head exceeds the configured limits"}
)
