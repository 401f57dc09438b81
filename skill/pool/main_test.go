package pool

import (
	"testing"

	"go.uber.org/goleak"
)

// A closed pool leaves no worker or janitor running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
