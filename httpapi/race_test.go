//go:build race

package httpapi

// raceEnabled: the race detector slows the embedded SQLite (transpiled C)
// some twenty-five times, so tests that push volume through it push less.
const raceEnabled = true
