package testutil

import (
	"os"
	"strconv"
	"strings"
	"time"
)

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

// MachineCPU is the busy CPU time of the whole machine so far, all
// cores together (Linux /proc/stat: user, nice, system, irq, softirq and
// steal; 0 elsewhere). Loopback network benchmarks report it beside
// ProcessCPU: the kernel charges part of a loopback connection's work
// (softirq) to no process, so ProcessCPU alone undercounts it.
func MachineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	// /proc/stat counts in USER_HZ, 100 a second on every Linux ABI Go
	// supports.
	return time.Duration(ticks) * 10 * time.Millisecond
}
