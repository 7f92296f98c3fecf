// Command backend is the benchmark's fallback upstream: a tiny raw-TCP
// HTTP/1.1 server that answers every request with 200 and the 12-byte body
// "hello world\n", keeping the connection alive; a GET under /json gets a
// 4 KiB JSON body instead (the response_body row), which -print-json
// writes out for the nginx backend to serve.
//
// bench/run.sh uses nginx as the backend when it is installed and this
// program otherwise, so the proxies under test always talk to something that
// costs next to nothing per request.
//
// Usage:
//
//	backend -addr 127.0.0.1:PORT
//
// It frames requests by their header block plus an optional Content-Length
// body (chunked request bodies are not supported; the benchmark sends none),
// answers pipelined requests in order with one write per read, and closes
// the connection after a request that carries "Connection: close".
package main
