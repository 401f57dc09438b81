//go:build !linux

package swarm

import "time"

type usage struct {
	user, sys time.Duration
	maxRSS    uint64
}

// readUsage is not implemented off Linux: CPU and RSS figures stay zero.
func readUsage() usage { return usage{} }
