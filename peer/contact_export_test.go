package peer

import "time"

// Test hooks for the external tests of first contact and discovery. They
// change package timing: call them before starting nodes and restore
// after the nodes have closed (register the restore with t.Cleanup first).

// SetContactTiming shortens the first-contact rescan interval and quorum
// wait; it returns a function that restores the previous values.
func SetContactTiming(rescan, quorumWait time.Duration) (restore func()) {
	r, q := contactRescan, contactQuorumWait
	contactRescan, contactQuorumWait = rescan, quorumWait
	return func() { contactRescan, contactQuorumWait = r, q }
}

// SetDiscoveryTiming shortens the bootstrap reconnect check and back-off
// and the first DHT rendezvous lookup; it returns a restore function.
func SetDiscoveryTiming(check, backoff, firstFind time.Duration) (restore func()) {
	c, b, f, a := bootstrapCheckInterval, bootstrapMinBackoff, rendezvousFirstInterval, advertiseMinBackoff
	bootstrapCheckInterval, bootstrapMinBackoff, rendezvousFirstInterval, advertiseMinBackoff = check, backoff, firstFind, backoff
	return func() {
		bootstrapCheckInterval, bootstrapMinBackoff, rendezvousFirstInterval, advertiseMinBackoff = c, b, f, a
	}
}
