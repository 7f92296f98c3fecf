// Package config defines Loopgate's one typed configuration, its YAML form,
// its defaults and its validation.
//
// Load or Parse a file, and hand the result to the engine:
//
//	cfg, err := config.Load("/etc/loopgate.yaml")
//	if err != nil {
//		// err lists every problem, one per line, e.g.
//		// config: line 14: routes[1] (id "admin").upstream: unknown upstream "nope"
//	}
//	table, _ := router.Compile(cfg.RouterSpecs()) // cannot fail: Parse checked it
//
// Parsing runs three steps, each with one job:
//
//  1. decode the YAML strictly: an unknown key, a value of the wrong type,
//     or a second YAML document is an error naming the key's path and line;
//  2. applyDefaults fills every zero-valued field with the default written
//     in its comment, including per-upstream and per-route fields (a route's
//     timeouts inherit its upstream's), so zero always means "default";
//  3. Validate rejects what cannot work and changes no option; what it
//     parses to judge (trusted_proxies, the filters' IP lists and regexes)
//     it keeps for building, so nothing is parsed twice. Parse adds to
//     each problem the line its path is written on (lineIndex).
//
// Load reads the file until two reads agree, so a file being written is
// never parsed half-way, and refuses one that sets nothing (read.go).
//
// Warnings reports what is valid but almost certainly a mistake (no routes,
// shadowed routes); -check prints it.
//
// Default returns the defaults alone, and Embedded the built-in demo
// configuration (default.yaml in this directory). docs/configuration.md
// documents every option for operators.
//
// Filters own their configuration, as Caddy's modules do. Each filter
// package registers its filters with package filters (filters.Register):
// name, default order, the top-level and route keys it owns (the yaml
// tags of its config types), its config factories and its constructor.
// This package imports filters/builtin, which registers those that ship
// with Loopgate, and knows none of their fields: decoding hands each
// filter's keys to the filter's own types (with the same strictness,
// paths and lines as the gateway's own keys), applyDefaults lets each
// config Provision itself, and Validate runs each config's Validate with
// a filters.Check that adds the line and the route id. FilterGlobal and
// Route.FilterConfig return the configs; Chain gives a route's chain, by
// name and in order, and FilterOrder a filter's final order;
// docs/filters.md explains the rules to operators.
//
// A *Config is a plain value: nothing in it is synchronised. Build it on one
// goroutine, then treat it as read-only; a read-only *Config may be shared.
package config
