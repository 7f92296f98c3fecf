// The observability sections: access_log and metrics, their defaults and
// their validation.

package config

import (
	"os"
	"path/filepath"
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
}

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
}

func (c *Config) validateObservability(p *problems) {
	a := &c.AccessLog
	positive(p, "access_log.ring_size", a.RingSize)
	if a.RingSize > maxAccessLogRing {
		p.add("access_log.ring_size", "%d is over the most, %d", a.RingSize, maxAccessLogRing)
	}
	if a.Path == "" || a.Path == Stdout || a.Path == Stderr {
		return
	}
	// The file itself is opened (and created) when the engine is built;
	// a directory that is not there is a typo worth naming here.
	dir := filepath.Dir(a.Path)
	if st, err := os.Stat(dir); err != nil {
		p.add("access_log.path", "%v", err)
	} else if !st.IsDir() {
		p.add("access_log.path", "%q is not a directory", dir)
	}
}
