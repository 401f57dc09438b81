//go:build race

package testutil

// RaceEnabled tells that the race detector is on. Measurement tests
// (TestMeasure*) that run one goroutine over large inputs skip under it:
// it slows them 10-15x and has nothing to check there. The README's test
// command runs them in a second pass without -race.
const RaceEnabled = true
