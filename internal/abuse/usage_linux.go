//go:build linux

package abuse

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// rss is the process's resident set size now, in bytes (0 if unknown).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// maxRSS is the process's peak resident set size since it started, in
// bytes (Linux reports ru_maxrss in KiB).
func maxRSS() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return uint64(ru.Maxrss) * 1024
}
