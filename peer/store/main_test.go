package store

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the store starts (checkpoint timers, the commit
// queue's leaders) ends by the time its tests return.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
