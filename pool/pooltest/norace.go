//go:build !race

// raceEnabled: this binary was built without -race.

package pooltest

const raceEnabled = false
