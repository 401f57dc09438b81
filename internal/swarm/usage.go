//go:build linux

package swarm

import (
	"syscall"
	"time"
)

type usage struct {
	user, sys time.Duration
	maxRSS    uint64 // bytes
}

// readUsage reads the process's CPU time and peak RSS (Linux reports
// ru_maxrss in KiB).
func readUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{
		user:   time.Duration(ru.Utime.Nano()),
		sys:    time.Duration(ru.Stime.Nano()),
		maxRSS: uint64(ru.Maxrss) * 1024,
	}
}
