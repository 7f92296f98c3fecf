// Error: why a call failed, as the HTTP status and JSON code the client sees.

package upstream

// Error describes a failed call. Status and Code are what the gateway answers
// when no response byte has reached the client yet.
type Error struct {
	Status  int
	Code    int
	Message string
	timeout bool
}

func (e *Error) Error() string { return e.Message }

// Timeout reports whether the call failed because a deadline passed.
func (e *Error) Timeout() bool { return e.timeout }

// The ways a call can fail.
var (
	ErrConnect      = &Error{Status: 502, Code: 50201, Message: "upstream connect failed"}
	ErrReset        = &Error{Status: 502, Code: 50202, Message: "upstream closed the connection before a complete response"}
	ErrBadResponse  = &Error{Status: 502, Code: 50202, Message: "upstream sent a malformed response"}
	ErrHeadTooLarge = &Error{Status: 502, Code: 50203, Message: "upstream response head exceeds the configured limits"}
	ErrPoolFull     = &Error{Status: 503, Code: 50302, Message: "upstream connection pool exhausted", timeout: true}
	ErrQueueFull    = &Error{Status: 503, Code: 50302, Message: "upstream connection pool exhausted and its wait queue full"}
	ErrPoolShare    = &Error{Status: 503, Code: 50302, Message: "route holds its share of the upstream connection pool"}
	ErrTimeout      = &Error{Status: 504, Code: 50401, Message: "upstream response timed out", timeout: true}
)
