//go:build race

package main

// raceEnabled: the race detector slows the benches several times and
// multiplies their memory; the speed-dependent bounds are then only logged.
const raceEnabled = true
