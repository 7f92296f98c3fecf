// Limits: the size bounds the parsers enforce, and their defaults.

package codec

// Default limits, matching the gateway's documented edge protection.
const (
	DefaultMaxURIBytes    = 8192
	DefaultMaxHeaderCount = 50
	DefaultMaxHeaderBytes = 16384
	DefaultMaxBodyBytes   = 10 << 20
)

// Limits bound what the parser accepts. A zero (or negative) field means "use the default".
// A Limits value is read-only during parsing and may be shared by any number of goroutines.
type Limits struct {
	// MaxURIBytes bounds the request-target. Default 8192. Beyond it: ErrURITooLong (414/41401).
	MaxURIBytes int
	// MaxHeaderCount bounds the number of header fields. Default 50. Beyond it: ErrHeadersTooLarge (431/43101),
	// or ErrResponseHeadTooLarge (502/50203) for responses.
	MaxHeaderCount int
	// MaxHeaderBytes bounds the whole head: skipped leading empty lines, the start line, every field line
	// and the final CRLF. Default 16384. Beyond it: ErrHeadersTooLarge (431/43101), or ErrResponseHeadTooLarge
	// (502/50203) for responses.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request body. Default 10 MiB. ParseRequest checks Content-Length against it;
	// a ChunkedDecoder reset with it checks the sum of chunk sizes. Beyond it: ErrBodyTooLarge (413/41301).
	// ParseResponse does not apply it.
	MaxBodyBytes int64
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{
		MaxURIBytes:    DefaultMaxURIBytes,
		MaxHeaderCount: DefaultMaxHeaderCount,
		MaxHeaderBytes: DefaultMaxHeaderBytes,
		MaxBodyBytes:   DefaultMaxBodyBytes,
	}
}

// WithDefaults returns l with every zero or negative field replaced by its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxURIBytes <= 0 {
		l.MaxURIBytes = DefaultMaxURIBytes
	}
	if l.MaxHeaderCount <= 0 {
		l.MaxHeaderCount = DefaultMaxHeaderCount
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return l
}

// effectiveLimits resolves a possibly nil *Limits to a fully defaulted value.
func effectiveLimits(lim *Limits) Limits {
	if lim == nil {
		return DefaultLimits()
	}
	return lim.WithDefaults()
}
