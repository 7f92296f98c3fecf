// Package access decides who may reach a route: it finds the real client
// address behind trusted proxies and refuses requests by address (allow and
// deny lists, runtime bans with a TTL) and by size (route limits tighter
// than the global ones).
//
// # Client IP
//
// The engine computes the client address once per request, before the
// chain runs, through this package's Registration.ClientIP (so it imports
// no filter), and stores it in Exchange.ClientIP:
//
//	trusted := cfg.TrustedPrefixes() // parsed once, when the config was validated
//	...
//	x.ClientIP = access.ClientIP(peer, req.Headers, trusted) // per request, no allocation
//
// Only a trusted peer's X-Forwarded-For and X-Real-IP are believed; the
// first address that is not itself a trusted proxy, reading
// X-Forwarded-For from the right, is the client; the last X-Real-IP counts
// only without any X-Forwarded-For entry. A client cannot spoof its
// address through an untrusted hop, nor through headers a trusted one
// passed on (see ClientIP for the whole walk).
//
// # Filters
//
// NewIPFilter ("ip_access", 403 / 40302) checks bans, then the deny lists,
// then the allow lists; NewLimitsFilter ("limits", 414 / 431 / 413) applies
// a route's own, tighter request limits. Both are immutable and shared by
// every loop.
//
// # Configuration
//
// Both filters register themselves (config.go): ip_access owns the keys
// ip_allow and ip_deny, at the top level and in a route (IPLists), and
// limits owns a route's limits key (LimitsRoute). engine/config decodes
// those keys into these types; Validate parses the IP lists once and New
// builds the filter from the parsed prefixes.
//
// # Bans
//
// A Bans is shared by the ip_access filters of every route and changed at
// run time, typically by the admin API:
//
//	bans := access.NewBans(0) // DefaultMaxBans
//	f := access.NewIPFilter(order, gAllow, gDeny, rAllow, rDeny, bans)
//	...
//	err := bans.Ban(netip.MustParsePrefix("203.0.113.0/24"), 10*time.Minute)
//
// Loops read the current snapshot with one atomic load and never wait for a
// writer; each write copies the set (pruning expired bans) and publishes the
// copy.
package access
