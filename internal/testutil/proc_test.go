package testutil

import (
	"os"
	"testing"
	"time"
)

// MachineCPU counts busy CPU of the whole machine: it grows while this
// test keeps a core busy, by at least the process's own CPU time for it
// (less 5 ticks for the kernel's tick sampling).
func TestMachineCPUCountsBusyTime(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	m0, p0 := MachineCPU(), ProcessCPU()
	if m0 <= 0 {
		t.Fatalf("MachineCPU = %v on a machine with /proc/stat", m0)
	}
	x := uint64(1)
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	m, p := MachineCPU()-m0, ProcessCPU()-p0
	if p < 100*time.Millisecond {
		t.Skipf("the busy loop got only %v of CPU (machine overloaded)", p)
	}
	if m < p-50*time.Millisecond {
		t.Fatalf("machine CPU grew %v while this process alone used %v (x %d)", m, p, x)
	}
}
