// WebSocket and other Upgrade tunnels: the process-wide bounds (the
// top-level websocket section) and a route's upgrade tokens.

package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// WebSocket bounds the tunnels that upgraded requests become (a 101
// Switching Protocols from the upstream turns the client and upstream
// connections into one tunnel). The section covers every Upgrade token a
// route allows, not only websocket. Changes apply live to tunnels opened
// afterwards; a tunnel keeps the settings it was opened with.
type WebSocket struct {
	// IdleTimeout closes a tunnel when neither side sent a byte for this
	// long, as nginx's proxy_read_timeout applies to its tunnels. Default 1h.
	IdleTimeout Duration `yaml:"idle_timeout"`

	// MaxTunnels caps the tunnels open in the process, all loops together.
	// An upgrade request past it is answered 503, code 50305. Default 10000.
	MaxTunnels int `yaml:"max_tunnels"`

	// Buffer is how many bytes one direction of a tunnel may hold queued
	// for a peer that reads slower than the other side writes; past it the
	// gateway stops reading the fast side until the queue drains to half.
	// Default 64KiB, at least 4KiB.
	Buffer ByteSize `yaml:"buffer"`
}

// The defaults of the websocket section and of a route's upgrade list.
const (
	defaultTunnelIdle   = Duration(time.Hour)
	defaultMaxTunnels   = 10000
	defaultTunnelBuffer = ByteSize(64 << 10)
	minTunnelBuffer     = ByteSize(4 << 10)

	// UpgradeWebSocket is the Upgrade token of RFC 6455.
	UpgradeWebSocket = "websocket"
)

func applyWebSocketDefaults(w *WebSocket) {
	setDefault(&w.IdleTimeout, defaultTunnelIdle)
	setDefault(&w.MaxTunnels, defaultMaxTunnels)
	setDefault(&w.Buffer, defaultTunnelBuffer)
}

// applyRouteUpgradeDefaults fills a route's upgrade list: [websocket]
// unless the route says websocket: false, which leaves it empty.
func applyRouteUpgradeDefaults(r *Route) {
	if r.Upgrade == nil && r.WebSocketOn() {
		r.Upgrade = defaultUpgrade[:1:1] // shared by every such route, never written
		return
	}
	for i, t := range r.Upgrade {
		r.Upgrade[i] = strings.ToLower(t)
	}
}

// defaultUpgrade is the Upgrade of a route that sets none.
var defaultUpgrade = []string{UpgradeWebSocket}

// WebSocketOn reports whether the route tunnels WebSocket upgrades: unless
// websocket: false, as Caddy, Traefik and Kong do.
func (r *Route) WebSocketOn() bool { return r.WebSocket == nil || *r.WebSocket }

func (c *Config) validateWebSocket(p *problems) {
	w := &c.WebSocket
	positive(p, "websocket.idle_timeout", w.IdleTimeout)
	positive(p, "websocket.max_tunnels", w.MaxTunnels)
	if w.Buffer < minTunnelBuffer {
		p.add("websocket.buffer", "%s is below the minimum %s", w.Buffer, minTunnelBuffer)
	}
}

func validateRouteUpgrade(p *problems, path string, r *Route) {
	for i, t := range r.Upgrade {
		at := func() string { return fmt.Sprintf("%s.upgrade[%d]", path, i) } // only for a problem: most routes have none
		switch {
		case !isToken(t):
			p.add(at(), "%q is not an HTTP token (RFC 9110 5.6.2)", t)
		case t == "h2c":
			p.add(at(), "h2c: HTTP/2 is not supported yet; h2c upgrade requests are served as HTTP/1.1")
		case slices.Contains(r.Upgrade[:i], t):
			p.add(at(), "%q is listed twice", t)
		case t == UpgradeWebSocket && !r.WebSocketOn():
			p.add(at(), "websocket is listed while the route sets websocket: false")
		}
	}
}

// isToken reports whether s is a non-empty HTTP token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', 'A' <= c && c <= 'Z':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
