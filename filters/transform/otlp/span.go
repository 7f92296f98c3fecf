// Span and Options: what one request's span holds, and where spans go.

package otlp

import (
	"fmt"
	"net/url"
	"time"
)

// MaxMethod bounds the request method a span keeps; a longer one is cut.
const MaxMethod = 16

// Span is the gateway's span of one request: a server span from the
// request's first byte to its end. Strings are shared, never copied: the
// route id and the node come from the compiled config.
type Span struct {
	TraceID  [16]byte
	SpanID   [8]byte
	ParentID [8]byte // the client's span; zero for a trace the gateway started
	Start    int64   // unix nanoseconds
	End      int64
	Status   int    // the HTTP status sent; 499 when the client left first
	Reason   string // how the exchange ended (filters.EndReason's name)
	Route    string // the route id
	Node     string // the upstream node that answered; "" when none did

	method    [MaxMethod]byte
	methodLen uint8
}

// SetMethod copies the request method into s.
func (s *Span) SetMethod(m []byte) { s.methodLen = uint8(copy(s.method[:], m)) }

// Method is the request method s holds.
func (s *Span) Method() []byte { return s.method[:s.methodLen] }

// Options say where the spans go and how they are batched. The zero value
// of a field means its default (Provision).
type Options struct {
	// Endpoint is the collector's OTLP/HTTP traces URL. A URL with no path
	// gets /v1/traces, the OTLP default. Required.
	Endpoint string
	// BatchSize is the most spans one post carries. Default 512.
	BatchSize int
	// FlushInterval is the longest a span waits for a batch to fill.
	// Default 1s.
	FlushInterval time.Duration
	// QueueSize is how many spans each event loop holds for the sender;
	// beyond it spans are dropped and counted. Default 4096. Fixed when the
	// exporter starts (the first config with otlp set): a reload keeps the
	// queues it has.
	QueueSize int
	// Timeout bounds one post. Default 5s.
	Timeout time.Duration
	// Headers are sent with every post (an API key of a hosted collector).
	Headers map[string]string
	// ServiceName is the resource's service.name. Default "loopgate".
	ServiceName string
}

// Defaults.
const (
	DefaultBatchSize     = 512
	DefaultFlushInterval = time.Second
	DefaultQueueSize     = 4096
	DefaultTimeout       = 5 * time.Second
	DefaultServiceName   = "loopgate"
	DefaultPath          = "/v1/traces"
)

// Provision fills in the defaults, and /v1/traces when Endpoint has no
// path.
func (o *Options) Provision() {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if u, err := url.Parse(o.Endpoint); err == nil && (u.Path == "" || u.Path == "/") {
		u.Path = DefaultPath
		o.Endpoint = u.String()
	}
}

// Problem is one option Validate refuses: the option's name and why.
type Problem struct{ Option, Reason string }

// Validate reports what cannot work, naming each option.
func (o *Options) Validate() []Problem {
	var out []Problem
	if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		out = append(out, Problem{"endpoint", fmt.Sprintf("want an http:// or https:// URL, got %q", o.Endpoint)})
	}
	for _, p := range []struct {
		name string
		v    int
		max  int
	}{{"batch_size", o.BatchSize, 1 << 16}, {"queue_size", o.QueueSize, 1 << 20}} {
		if p.v < 1 || p.v > p.max {
			out = append(out, Problem{p.name, fmt.Sprintf("must be 1 to %d, got %d", p.max, p.v)})
		}
	}
	if o.FlushInterval < 0 {
		out = append(out, Problem{"flush_interval", "must be positive"})
	}
	if o.Timeout < 0 {
		out = append(out, Problem{"timeout", "must be positive"})
	}
	return out
}
