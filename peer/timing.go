package peer

import "time"

// timing is a node's internal intervals. Every node resolves its own in
// New (Config.timing, unexported, nil for the defaults): tests shorten
// them through export_test.go for the nodes they start, never by mutating
// package state that other nodes (and their timers) read at the same
// time.
type timing struct {
	// contactRescan is the longest interval between two scans of the
	// connected peers (back-offs that ran out, re-attestation).
	contactRescan time.Duration
	// contactQuorumWait is how long first contact waits for gossip or the
	// peer's presentation to admit it through the trust quorum before it
	// challenges the peer.
	contactQuorumWait time.Duration
	// contactLeash is how long a session may hold a slot, from the
	// opening of its stream, before the peer answers the hello.
	contactLeash time.Duration
	// verifyFirstRetry is how soon, jittered, the node with the higher
	// peer ID of two that verify first asks again after a VERIFY_FIRST
	// (the lower asks after verifyFirstQuickRetry).
	verifyFirstRetry time.Duration
	// Discovery: the bootstrap reconnect check and back-off, the first
	// rendezvous lookup and the advertise back-off.
	bootstrapCheckInterval  time.Duration
	bootstrapMinBackoff     time.Duration
	rendezvousFirstInterval time.Duration
	advertiseMinBackoff     time.Duration
}

func defaultTiming() timing {
	return timing{
		contactRescan:           30 * time.Second,
		contactQuorumWait:       2 * time.Second,
		contactLeash:            time.Second,
		verifyFirstRetry:        contactTransientMax / 2,
		bootstrapCheckInterval:  30 * time.Second,
		bootstrapMinBackoff:     time.Second,
		rendezvousFirstInterval: 5 * time.Second,
		advertiseMinBackoff:     5 * time.Second,
	}
}
