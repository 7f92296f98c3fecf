// The engine's end of the access and error logs: what a finished exchange
// hands to its loop's rings (see package accesslog).

package engine

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// loopLog is one loop's producing side of the two logs. Owned by the loop.
type loopLog struct {
	access *accesslog.Ring // nil when access_log is off
	errors *accesslog.Ring
	limit  accesslog.Limiter // error lines per second; Suppressed read by metrics
}

// initLogs builds the log writer (opening the access log file, so a path
// that cannot be written fails here) and gives each loop its rings; it
// also sets the metrics switch. Called once by New.
func (s *Server) initLogs(cfg *config.Config) error {
	w, err := accesslog.New(accesslog.Options{Path: cfg.AccessLog.Path, Loops: len(s.loops),
		RingSize: cfg.AccessLog.RingSize, Fields: cfg.AccessLog.FormatFields(),
		ErrorPath: cfg.ErrorLog.Path, ErrorLevel: cfg.ErrorLog.Level})
	if err != nil {
		return err
	}
	s.logs = w
	notices.sink.Store(w) // what is logged before Run (config warnings) goes to this error log too
	for i, l := range s.loops {
		l.log.access, l.log.errors = w.Access(i), w.Errors(i)
	}
	s.metrics.quiet.Store(!cfg.Metrics.RecordsRequests())
	return nil
}

// ReopenLogs reopens the access and error log files at their paths, for
// logrotate (SIGUSR1). It never waits. Safe for concurrent use.
func (s *Server) ReopenLogs() { s.logs.Reopen() }

// LogEvent writes one line to the error log now, such as a reload's
// result. Safe for concurrent use; never call it on an event loop.
func (s *Server) LogEvent(ev accesslog.Event) { s.logs.Event(ev) }

// ErrorsHandler serves GET /errors on the admin port: the last error-log
// lines (accesslog.RecentLines), oldest first and newest last, as
// {"lines":[...]}, each line the JSON object the error log wrote. It takes
// the error log's mutex, never a loop's time.
func (s *Server) ErrorsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		lines := s.logs.Recent()
		raw := make([]json.RawMessage, len(lines))
		for i, l := range lines {
			if json.Valid([]byte(l)) {
				raw[i] = json.RawMessage(l)
			} else { // a line cut at its bound: kept as text
				raw[i], _ = json.Marshal(l)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // as every admin answer: the text as written, not "\u003e"
		_ = enc.Encode(struct {
			Lines []json.RawMessage `json:"lines"`
		}{raw})
	})
}

// SetErrorLog sends the error log to w instead of stderr. Call it before
// Run.
func (s *Server) SetErrorLog(w io.Writer) { s.logs.SetErrorOutput(w) }

// logEnd hands a finished exchange to the logs: an access record when the
// access log is on, and an error record for an answer the gateway made
// itself with a 5xx or 408, or for a response it cut (see cut), when the
// loop's limiter lets it through. A
// full ring drops the record (counted); the loop never waits. putExchange
// calls it on every path, after done has set fx.End.
func (ex *exchange) logEnd() {
	if ex.end.started == 0 {
		return
	}
	if t := ex.upgrade.tunnel; t != nil {
		ex.keepRecord(t) // the tunnel writes the line at its close
		return
	}
	lg := &ex.loop.log
	if lg.access != nil {
		if rec := lg.access.Reserve(); rec != nil {
			ex.fillRecord(rec)
			lg.access.Commit()
		}
		if ex.chain != nil {
			// Filters a later request does not reach must not show this
			// request's times (see fillRecord).
			clear(ex.fx.Timings[:ex.chain.Len()])
		}
	}
	if ex.end.errCode == 0 || !ex.resp.cut && ex.end.status < 500 && ex.end.status != 408 {
		return
	}
	if ok, held := lg.limit.Allow(ex.end.started + ex.fx.End.Duration); ok {
		if rec := lg.errors.Reserve(); rec != nil {
			ex.fillRecord(rec)
			rec.Suppressed = held
			lg.errors.Commit()
		}
	}
}

// fillRecord sets every field of rec from the finished exchange.
func (ex *exchange) fillRecord(rec *accesslog.Record) {
	end := &ex.fx.End
	rec.Start, rec.Duration, rec.Upstream = ex.end.started, end.Duration, ex.log.upstreamNs
	rec.BytesIn, rec.BytesOut = end.BytesIn, end.BytesOut
	rec.Status, rec.Retries, rec.Code, rec.Cut = uint16(end.Status), uint16(end.Retries), uint32(ex.end.errCode), ex.resp.cut
	rec.Suppressed = 0
	rec.End, rec.Node, rec.Message, rec.Event = end.Reason.String(), end.Node, ex.end.errMsg, ""
	rec.Route = ""
	if ex.route != nil {
		rec.Route = ex.route.id
	}
	rec.Req = ex.logReq
	rec.SetRequestID(ex.requestID())
	rec.Client = ex.cc.peer
	rec.TLSVersion, rec.TLSCipher, rec.SNI = ex.cc.tlsLog.version, ex.cc.tlsLog.cipher, ex.cc.tlsLog.sni
	if ex.log.client.IsValid() {
		rec.Client = ex.log.client
	}
	rec.SetFilters(nil, nil)
	rec.SetTraceID(nil)
	if ex.chain != nil {
		rec.SetTraceID(ex.fx.TraceID)
		rec.Client = ex.fx.ClientIP // trusted_proxies applied
		// The filters that ran are a prefix of the chain; the rest have
		// zero times (logEnd clears them after each request).
		n := ex.chain.Len()
		for n > 0 && ex.fx.Timings[n-1].Self == 0 {
			n--
		}
		rec.SetFilters(ex.chain, &ex.fx.Timings)
		rec.Filters = uint8(n)
	}
}

// markUpstreamStart notes when the upstream call starts, for the access
// log's upstream time; without an access log nothing reads it. Both ends
// read the loop's clock, as the exchange's own start and end do, so the
// upstream time never exceeds the duration it lies within (a fresh
// reading here against a cached one at the end could).
func (ex *exchange) markUpstreamStart() {
	if ex.loop.log.access != nil {
		ex.log.upstreamStart = ex.loop.fresh()
	}
}

// markUpstreamHead notes the upstream's final response head.
func (ex *exchange) markUpstreamHead() {
	if ex.log.upstreamStart != 0 {
		ex.log.upstreamNs = ex.loop.fresh() - ex.log.upstreamStart
	}
}

// logRejected logs a request that was answered before an exchange began
// (unparseable, or its head too slow: 408), as logEnd would.
func (cc *clientConn) logRejected(status, code int, msg string, start int64, id []byte) {
	lg := &cc.loop.log
	now := loopstat.Now()
	fill := func(rec *accesslog.Record) {
		*rec = accesslog.Record{Start: start, Duration: now - start, Upstream: -1,
			Status: uint16(status), Code: uint32(code), Message: msg,
			End: filters.EndRejected.String(), Client: cc.peer,
			TLSVersion: cc.tlsLog.version, TLSCipher: cc.tlsLog.cipher, SNI: cc.tlsLog.sni}
		if status == 408 {
			rec.End = filters.EndTimeout.String()
		}
		rec.SetRequestID(id)
	}
	if lg.access != nil {
		if rec := lg.access.Reserve(); rec != nil {
			fill(rec)
			lg.access.Commit()
		}
	}
	if status != 408 && status < 500 {
		return
	}
	if ok, held := lg.limit.Allow(now); ok {
		if rec := lg.errors.Reserve(); rec != nil {
			fill(rec)
			rec.Suppressed = held
			lg.errors.Commit()
		}
	}
}

// applyLiveObservability applies what of cfg's observability may change
// on a reload: metrics.per_request. Reload calls it when it swaps cfg in;
// config.Compare refuses a change of access_log, whose rings and file are
// made at start.
func (s *Server) applyLiveObservability(cfg *config.Config) {
	s.metrics.quiet.Store(!cfg.Metrics.RecordsRequests())
}
