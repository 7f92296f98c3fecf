//go:build race

// raceEnabled: this binary was built with -race.

package pooltest

const raceEnabled = true
