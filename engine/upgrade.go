// upgrade: the HTTP side of an Upgrade tunnel: which requests may ask for
// one (admitUpgrade), the Upgrade headers they forward, and the upstream's
// 101 that turns the exchange into a tunnel (switchProtocols).

package engine

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

// routeTunnel is a route's upgrade policy, compiled; its tunnel series
// are the route's (routeMetrics.tunnelShard).
type routeTunnel struct {
	tokens []string // Upgrade tokens the route tunnels, lower case (config.Route.Upgrade)
}

// allows reports whether the route tunnels protocol p, a token of an
// Upgrade field; its version ("name/version") is not judged.
func (rt *routeTunnel) allows(p []byte) bool {
	for i, c := range p {
		if c == '/' {
			p = p[:i]
			break
		}
	}
	for _, t := range rt.tokens {
		if codec.EqualFold(p, t) {
			return true
		}
	}
	return false
}

// upgradeState is an exchange's Upgrade: whether it forwards one, holding
// a slot of websocket.max_tunnels meanwhile, and the tunnel its 101 opened.
// Reset by endUpgrade, which putExchange calls on every path.
type upgradeState struct {
	asked  bool    // the Upgrade headers are forwarded and a slot is held
	tunnel *tunnel // the tunnel the slot went to; nil before a 101
}

var (
	errUpgradeRefused = &codec.Error{Status: 403, Code: 40305, Message: "upgrade to this protocol is not allowed on this route"}
	errUpgradeBody    = &codec.Error{Status: 400, Code: 40001, Message: "an upgrade request must not carry a body"}
	errTooManyTunnels = &codec.Error{Status: 503, Code: 50305, Message: "too many open tunnels; retry later"}
)

// admitUpgrade decides, once a request is routed, what its Upgrade
// becomes. Tokens the route lists are forwarded; h2c is dropped (HTTP/2
// does not exist here yet, and a client asking for h2c takes an HTTP/1.1
// answer, RFC 9113 3.1), as is an Upgrade naming nothing, and the request
// goes on as plain HTTP/1.1; any other token refuses the request (403,
// code 40305), as Envoy refuses upgrades a route is not configured for.
// A request that may upgrade takes a slot of websocket.max_tunnels (503,
// code 50305, when none is left) until its exchange ends or the slot
// passes to its tunnel. It reports false when it answered the request.
func (ex *exchange) admitUpgrade(req *codec.Request) bool {
	allowed, refused := false, false
	for _, h := range req.Headers {
		if !codec.EqualFold(h.Name, "upgrade") {
			continue
		}
		eachToken(h.Value, func(p []byte) {
			switch {
			case ex.route.tunnel.allows(p):
				allowed = true
			case !codec.EqualFold(p, "h2c"):
				refused = true
			}
		})
	}
	switch {
	case allowed && ex.body.mode != codec.BodyNone:
		ex.localReply(errUpgradeBody)
		return false
	case allowed:
	case refused:
		ex.localReply(errUpgradeRefused)
		return false
	default:
		return true // served as HTTP/1.1; the Upgrade headers are hop-by-hop and stay behind
	}
	reg := ex.loop.srv.tunnels
	if reg.open.Add(1) > ex.snap.tunnel.maxTunnels {
		reg.open.Add(-1)
		reg.refused.Add(1)
		ex.fx.Rejection.AddHeader("Retry-After", retryAfterOne)
		ex.localReply(errTooManyTunnels)
		return false
	}
	ex.upgrade.asked = true
	return true
}

// eachToken calls f with each element of a comma-separated list value,
// trimmed, skipping empty ones.
func eachToken(v []byte, f func([]byte)) {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		if t := codec.TrimOWS(v[:i]); len(t) > 0 {
			f(t)
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
}

// appendUpgrade writes the upstream head's Connection and Upgrade fields
// for an exchange that asked for a tunnel: the client's Upgrade tokens the
// route allows, in the client's order.
func (ex *exchange) appendUpgrade(dst []byte, hs codec.Headers) []byte {
	dst = append(dst, "Connection: Upgrade\r\nUpgrade: "...)
	first := true
	for _, h := range hs {
		if !codec.EqualFold(h.Name, "upgrade") {
			continue
		}
		eachToken(h.Value, func(p []byte) {
			if ex.route.tunnel.allows(p) {
				if !first {
					dst = append(dst, ", "...)
				}
				first = false
				dst = append(dst, p...)
			}
		})
	}
	return append(dst, "\r\n"...)
}

// switchProtocols takes the upstream's 101 to a request that asked for a
// tunnel (ResponseHead): the client gets the 101 with the upstream's
// end-to-end fields and the route's response edits, the upstream
// connection leaves its pool, and the exchange ends into a tunnel that
// keeps its slot. A 101 naming no protocol, or one the route does not
// tunnel, is left to the call, which fails it (502, code 50202).
func (ex *exchange) switchProtocols(c *upstream.Call, r *codec.Response) bool {
	cc, l := ex.cc, ex.loop
	proto := r.Headers.Get("upgrade")
	if len(proto) == 0 || !ex.route.tunnel.allows(codec.TrimOWS(proto)) {
		return true
	}
	ex.end.upStatus, ex.end.status = r.Status, r.Status
	ex.setPhase(phaseStreaming)
	ex.markUpstreamHead()
	var edits *filters.HeaderEdits
	if ex.chain != nil {
		ex.runResponseFilters(r.Status)
		edits = &ex.fx.RespEdits
	}
	dst := l.takeOut()
	dst = appendStatusLine(dst, r)
	dst = appendEndToEnd(dst, r.Headers, r.ConnectionNames, false, edits, nil)
	dst = append(dst, "Connection: Upgrade\r\nUpgrade: "...)
	dst = append(dst, codec.TrimOWS(proto)...)
	l.out = append(dst, "\r\n\r\n"...)
	if !cc.write(l.out) {
		c.Abort() // the client is gone; its close is on its way
		return false
	}
	up, upTLS := c.Detach()
	cc.ex = nil
	ex.upgrade.tunnel = openTunnel(l, cc, up, upTLS, &ex.snap.tunnel, ex.route.metrics.tunnelShard(l.index))
	l.putExchange(ex)
	return true
}

// keepRecord is logEnd for an exchange that became a tunnel: its access
// record waits in the tunnel, which writes it at the close (tunnel.log).
func (ex *exchange) keepRecord(t *tunnel) {
	if ex.loop.log.access != nil {
		t.rec = new(accesslog.Record)
		ex.fillRecord(t.rec)
	}
}

// upgradeRefused writes an error line for an upstream that answered an
// upgrade request with a final status other than 101: the client gets
// that answer as a normal response, and the connection closes after it,
// since what the client sent behind its request may not be HTTP.
func (ex *exchange) upgradeRefused(c *upstream.Call, status int) {
	ex.cc.closeAfter = true
	lg := &ex.loop.log
	now := loopstat.Now()
	ok, held := lg.limit.Allow(now)
	if !ok {
		return
	}
	rec := lg.errors.Reserve()
	if rec == nil {
		return
	}
	*rec = accesslog.Record{Start: ex.end.started, Duration: now - ex.end.started, Upstream: -1, Status: uint16(status),
		End: filters.EndServed.String(), Route: ex.route.id, Node: c.Node(), Message: "upstream refused the upgrade", Event: accesslog.EventUpgradeRefused,
		Client: ex.cc.peer, Req: ex.logReq, Suppressed: held}
	rec.SetRequestID(ex.requestID())
	lg.errors.Commit()
}

// endUpgrade gives back the slot of an exchange that asked for a tunnel
// and did not get one. putExchange calls it on every path, last.
func (ex *exchange) endUpgrade() {
	if ex.upgrade.asked && ex.upgrade.tunnel == nil {
		ex.loop.srv.tunnels.open.Add(-1)
	}
	ex.upgrade = upgradeState{}
}
