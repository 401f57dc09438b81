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

// openFileLimit is the process's soft limit on open files (0: unknown).
// The Go runtime raises it to the hard limit at start.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}
