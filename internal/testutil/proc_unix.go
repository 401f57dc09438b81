//go:build unix

package testutil

import (
	"syscall"
	"time"
)

// ProcessCPU is the user and system CPU time this process used so far
// (benchmarks report CPU per operation from it).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
