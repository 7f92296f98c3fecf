// Package confstore keeps the admin API's side of the config: the changes
// the API made over the config file (the overlay), and the numbered
// versions every applied config became, each with its diff against the
// one before.
//
// A config document is the YAML config as yaml.v3 decodes it into maps,
// lists and scalars (Doc); the plainest route items of a large file are
// decoded to the same values without it (PlainRoutes, Reparser). Its resources are what the API writes one at a
// time: routes (keyed by id) and upstreams (keyed by name), the items of
// the two lists; every other top-level key is a setting, keyed by its
// name. A Change is one resource's value before and after; a version's
// diff is its changes, and undoing them in reverse order walks back to any
// version still kept, which is how a rollback finds its target without a
// copy of every version.
//
// The file is the base and the overlay wins: Merge(file, overlay) is the
// config that runs, at start and after every reload of the file, and
// Delta(file, target) is the overlay that makes a target config from the
// file. An overlay holds whole resources, so a resource the API wrote
// shadows the file's resource of the same key until the API deletes or
// resets it.
//
// The state (overlay and versions) lives in one JSON file, replaced
// atomically by Save: written to a temporary file in the same directory,
// fsynced, renamed over the old one, and the directory fsynced, so a crash
// at any point leaves the old state or the new one, whole.
package confstore
