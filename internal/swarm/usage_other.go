//go:build !linux

package swarm

import "time"

type usage struct {
	user, sys time.Duration
	maxRSS    uint64
}

// readUsage is not implemented off Linux: CPU and RSS figures stay zero.
func readUsage() usage { return usage{} }

// openFileLimit is unknown off Linux: no open-file check is made.
func openFileLimit() int { return 0 }
