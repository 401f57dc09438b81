package peer

import "time"

// SetContactLeash sets how long a first-contact session may hold a slot
// before the peer answers the hello; it returns a restore function. Call
// it before starting nodes and restore after they have closed.
func SetContactLeash(d time.Duration) (restore func()) {
	old := contactLeash.Swap(int64(d))
	return func() { contactLeash.Store(old) }
}
