// Package bounded holds helpers for tables a remote party can grow: every
// such table has a capacity, and a full one makes room in batches.
package bounded

// MakeRoom frees a sixteenth of m when it holds max entries or more:
// entries idle reports first, then any. A flood of fresh keys against a
// table of busy entries then costs one scan per max/16 new keys, not one
// per key.
func MakeRoom[K comparable, V any](m map[K]V, max int, idle func(V) bool) {
	if len(m) < max {
		return
	}
	target := max - max/16
	for k, v := range m {
		if len(m) <= target {
			return
		}
		if idle(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) <= target {
			return
		}
		delete(m, k)
	}
}
