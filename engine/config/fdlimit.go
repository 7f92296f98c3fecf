// The max_connections default, derived from the descriptor limit.

package config

import "fmt"

// maxConnectionsCap is the most max_connections defaults to, however
// many descriptors the process may open.
const maxConnectionsCap = 100000

// descriptorsReserved is what the default leaves aside from the
// descriptor limit besides two per connection: the standard streams, log
// files, the admin port, Redis and spill files, and per loop its
// listener, poller and eventfds.
func descriptorsReserved(loops int) uint64 { return 128 + 8*uint64(loops) }

// DefaultMaxConnections is max_connections when the config leaves it out:
// with limit descriptors (RLIMIT_NOFILE) and loops event loops, half of
// what the reserve leaves, since a proxied request holds a client and an
// upstream connection (HAProxy derives its maxconn the same way); at most
// 100000 and at least 1. With no limit (limit 0) it is 100000.
func DefaultMaxConnections(limit uint64, loops int) int {
	if limit == 0 {
		return maxConnectionsCap
	}
	r := descriptorsReserved(loops)
	if limit <= r+2 {
		return 1
	}
	return int(min((limit-r)/2, maxConnectionsCap))
}

// DescriptorWarning says when max_connections needs more descriptors than
// limit allows, that is when it is above the default for limit; "" when
// it does not, or when limit is 0 (unknown).
func (c *Config) DescriptorWarning(limit uint64) string {
	n := c.Limits.MaxConnections
	if limit == 0 || n <= DefaultMaxConnections(limit, c.EventLoops()) {
		return ""
	}
	return fmt.Sprintf("config: limits.max_connections %d needs about %d file descriptors (two per connection and %d more) but RLIMIT_NOFILE is %d: "+
		"past it, accepting pauses and upstream connects fail; raise the limit (LimitNOFILE= in the systemd unit, ulimit -n) or lower max_connections",
		n, 2*uint64(n)+descriptorsReserved(c.EventLoops()), descriptorsReserved(c.EventLoops()), limit)
}
