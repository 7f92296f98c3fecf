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
//  3. Validate rejects what cannot work and changes nothing. Parse adds to
//     each problem the line its path is written on (lineIndex).
//
// Warnings reports what is valid but almost certainly a mistake (no routes,
// shadowed routes); -check prints it.
//
// Default returns the defaults alone, and Embedded the built-in demo
// configuration (default.yaml in this directory). docs/configuration.md
// documents every option for operators.
//
// Filters are named in the config (the Filter* constants) and ordered by
// DefaultFilterOrders, which filter_orders overrides. RouteFilters gives a
// route's chain, by name and in order, and FilterOrder a filter's final
// order; docs/filters.md explains the rules to operators.
//
// A *Config is a plain value: nothing in it is synchronised. Build it on one
// goroutine, then treat it as read-only; a read-only *Config may be shared.
package config
