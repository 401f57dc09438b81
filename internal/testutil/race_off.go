//go:build !race

package testutil

// RaceEnabled tells that the race detector is on (see race_on.go).
const RaceEnabled = false
