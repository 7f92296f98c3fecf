// Package otlp exports the gateway's own span of each sampled request over
// OTLP/HTTP with the JSON encoding (POST <endpoint>, Content-Type
// application/json, an ExportTraceServiceRequest), batched off the event
// loops with bounded memory.
//
// An event loop records a finished span with Record into its own ring of
// fixed-size slots: a single-producer, single-consumer queue whose only
// shared state is two atomic counters, so recording takes no lock, waits
// for nothing and allocates nothing. One sender goroutine drains every
// ring, encodes a batch into a reused buffer and posts it, retrying a
// failed post with a doubling backoff. A full ring drops the span and
// counts it: the loops never wait for the collector.
//
// The Exporter is the trace_context filter's server-owned service: made
// once per server, it outlives reloads. Each config version's filter holds
// its own Options and hands them to Record, so a reload changes where the
// spans go from the next request on, and a config that was compiled but
// refused changes nothing.
package otlp
