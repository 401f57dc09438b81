//go:build !race

package protocol

// raceEnabled: the race detector is on (sync.Pool then drops items at
// random, and everything runs slower).
const raceEnabled = false
