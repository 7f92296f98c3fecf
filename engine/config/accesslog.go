// The observability sections: access_log, error_log and metrics, their
// defaults and their validation.

package config

import (
	"os"
	"path/filepath"
	"strings"
)

// AccessLog is where the access log goes. Off by default.
type AccessLog struct {
	// Path is "stdout", "stderr" or a file, opened for appending (created
	// 0644 if missing) when the engine is built, and reopened on SIGUSR1
	// for logrotate. Default "" = no access log. The error log is written
	// either way (to stderr; see docs/operations.md).
	Path string `yaml:"path"`

	// RingSize is how many finished requests each event loop can hand to
	// the log writer before it catches up; past it lines are dropped and
	// counted (loopgate_access_log_dropped_total), and the loop never
	// waits. Rounded up to a power of two. Each slot costs about 640 bytes
	// per loop. Default 4096.
	RingSize int `yaml:"ring_size"`

	// Format chooses the line's fields, as nginx's log_format does: the
	// names of AccessLogFields as $variables, in the order the line is to
	// have them, e.g. "$time $request_id $route $status". Each becomes
	// the JSON key of its name and is always written ("" or 0 when it has
	// no value, null for upstream_us). Default "" = the standard line
	// (every field, the empty ones left out; see docs/operations.md).
	Format string `yaml:"format"`
}

// AccessLogFields are the fields an access_log format may name.
var AccessLogFields = []string{"time", "request_id", "client_ip", "method", "path", "path_truncated", "status",
	"code", "route", "upstream", "bytes_in", "bytes_out", "duration_us", "upstream_us", "retries", "end", "filters", "trace_id",
	"tls_version", "tls_cipher", "sni"}

// FormatFields returns the field names of Format, in order; nil for the
// standard line. Format must be valid (Validate checks it).
func (a *AccessLog) FormatFields() []string {
	var out []string
	for _, v := range strings.Fields(a.Format) {
		out = append(out, strings.TrimPrefix(v, "$"))
	}
	return out
}

// ErrorLog is where the error log goes (gateway-made errors, reloads,
// notices such as breaker and health changes), one JSON line each.
type ErrorLog struct {
	// Path is "stderr", "stdout" or a file, opened for appending (created
	// 0644 if missing) when the engine is built and reopened on SIGUSR1,
	// like the access log's. Default "stderr".
	Path string `yaml:"path"`

	// Level is the least severe line written: debug, info, warn or error.
	// Default info.
	Level string `yaml:"level"`
}

// Error log levels, least severe first.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Stdout and Stderr as an access_log path write to the process's streams.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// On reports whether an access log is configured.
func (a *AccessLog) On() bool { return a.Path != "" }

// Metrics switches what the data plane records.
type Metrics struct {
	// PerRequest records the per-request route series (requests by status
	// class, latency, in-flight, rejections by code). false leaves them at
	// zero and saves their cost per request; connection, upstream node
	// and filter series are still kept. Default true.
	PerRequest *bool `yaml:"per_request"`
}

// RecordsRequests reports metrics.per_request with its default applied.
func (m *Metrics) RecordsRequests() bool { return m.PerRequest == nil || *m.PerRequest }

const (
	defaultAccessLogRing = 4096
	maxAccessLogRing     = 1 << 20
)

func applyObservabilityDefaults(c *Config) {
	setDefault(&c.AccessLog.RingSize, defaultAccessLogRing)
	setDefault(&c.ErrorLog.Path, Stderr)
	setDefault(&c.ErrorLog.Level, LevelInfo)
}

func (c *Config) validateObservability(p *problems) {
	a := &c.AccessLog
	positive(p, "access_log.ring_size", a.RingSize)
	if a.RingSize > maxAccessLogRing {
		p.add("access_log.ring_size", "%d is over the most, %d", a.RingSize, maxAccessLogRing)
	}
	seen := map[string]bool{}
	for _, v := range strings.Fields(a.Format) {
		name, ok := strings.CutPrefix(v, "$")
		switch {
		case !ok:
			p.add("access_log.format", "%q is not a $variable", v)
		case !knownField(name):
			p.add("access_log.format", "unknown field %q (one of %s)", v, strings.Join(AccessLogFields, ", "))
		case seen[name]:
			p.add("access_log.format", "%q appears twice", v)
		}
		seen[name] = true
	}
	if a.Format != "" && len(seen) == 0 {
		p.add("access_log.format", "names no field")
	}
	logPath(p, "access_log.path", a.Path)
	e := &c.ErrorLog
	switch e.Level {
	case LevelDebug, LevelInfo, LevelWarn, LevelError:
	default:
		p.add("error_log.level", "%q is not one of debug, info, warn, error", e.Level)
	}
	logPath(p, "error_log.path", e.Path)
}

func knownField(name string) bool {
	for _, f := range AccessLogFields {
		if f == name {
			return true
		}
	}
	return false
}

// logPath checks a log's path: a stream's name, or a file in a directory
// that exists.
func logPath(p *problems, key, path string) {
	if path == "" || path == Stdout || path == Stderr {
		return
	}
	// The file itself is opened (and created) when the engine is built;
	// a directory that is not there is a typo worth naming here.
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		p.add(key, "%v", err)
	} else if !st.IsDir() {
		p.add(key, "%q is not a directory", dir)
	}
}
