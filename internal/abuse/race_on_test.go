//go:build race

package abuse

// raceEnabled: the race detector slows the bench several times and
// multiplies its memory; the speed-dependent bounds are then only logged.
const raceEnabled = true
