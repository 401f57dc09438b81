package testutil

import (
	"os"
	"strconv"
	"strings"
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

// ProcessSyscalls is the read and write system calls this process made
// so far (Linux /proc/self/io; 0, 0 elsewhere).
func ProcessSyscalls() (reads, writes int64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}
