//go:build !race

// raceEnabled: the race detector makes sync.Pool drop items at random.

package auth

const raceEnabled = false
