package peer

import "time"

// Test hooks for the external tests of first contact and discovery: each
// returns cfg with the node's own timing changed (Config.timing), so a
// test shortens the intervals of the nodes it starts and nothing else.

func timingOf(cfg *Config) *timing {
	if cfg.timing == nil {
		t := defaultTiming()
		cfg.timing = &t
	}
	return cfg.timing
}

// WithContactTiming shortens the first-contact rescan interval and quorum
// wait of the node cfg starts.
func WithContactTiming(cfg Config, rescan, quorumWait time.Duration) Config {
	t := timingOf(&cfg)
	t.contactRescan, t.contactQuorumWait = rescan, quorumWait
	return cfg
}

// WithDiscoveryTiming shortens the bootstrap reconnect check and back-off
// and the first DHT rendezvous lookup of the node cfg starts.
func WithDiscoveryTiming(cfg Config, check, backoff, firstFind time.Duration) Config {
	t := timingOf(&cfg)
	t.bootstrapCheckInterval, t.bootstrapMinBackoff, t.rendezvousFirstInterval, t.advertiseMinBackoff = check, backoff, firstFind, backoff
	return cfg
}

// WithContactLeash sets how long a first-contact session of the node cfg
// starts may hold a slot before the peer answers the hello.
func WithContactLeash(cfg Config, d time.Duration) Config {
	timingOf(&cfg).contactLeash = d
	return cfg
}

// WithVerifyFirstRetry sets how soon the node cfg starts, when it has the
// higher peer ID of two that verify first, asks again after a
// VERIFY_FIRST (jittered by a quarter either way; the lower ID asks after
// verifyFirstQuickRetry, 5 s).
func WithVerifyFirstRetry(cfg Config, d time.Duration) Config {
	timingOf(&cfg).verifyFirstRetry = d
	return cfg
}
