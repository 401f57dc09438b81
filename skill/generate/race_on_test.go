//go:build race

package generate

// raceEnabled: the race detector is on. Measurement tests that run one
// goroutine over large inputs skip under it (it slows them 10-15x and has
// nothing to check there); CI runs them in the plain pass of
// .ci/run.
const raceEnabled = true
