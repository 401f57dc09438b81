package bounded

import "testing"

// A full table loses a sixteenth, idle entries first; a table below its
// capacity is left alone.
func TestMakeRoom(t *testing.T) {
	const max = 64
	m := map[int]bool{}
	for i := range max {
		m[i] = i%4 == 0 // a quarter idle: more than a sixteenth
	}
	MakeRoom(m, max+1, func(idle bool) bool { return idle })
	if len(m) != max {
		t.Fatalf("below capacity: %d entries left of %d", len(m), max)
	}
	MakeRoom(m, max, func(idle bool) bool { return idle })
	if len(m) != max-max/16 {
		t.Fatalf("%d entries left, want %d", len(m), max-max/16)
	}
	for i := range max {
		if _, ok := m[i]; !ok && i%4 != 0 {
			t.Fatalf("busy entry %d evicted while idle ones were left", i)
		}
	}
	// None idle: any go.
	busy := map[int]bool{}
	for i := range max {
		busy[i] = false
	}
	MakeRoom(busy, max, func(idle bool) bool { return idle })
	if len(busy) != max-max/16 {
		t.Fatalf("all busy: %d entries left, want %d", len(busy), max-max/16)
	}
}
