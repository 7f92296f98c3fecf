//go:build !unix

package config

// descriptorLimit is unknown here: max_connections defaults to 100000.
func descriptorLimit() uint64 { return 0 }
