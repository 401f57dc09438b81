//go:build !unix

package testutil

import "time"

// ProcessCPU is 0 where the system has no getrusage (the benchmarks'
// CPU figures are then 0; their other figures stand).
func ProcessCPU() time.Duration { return 0 }
