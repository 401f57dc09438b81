package main

import (
	"fmt"

	"github.com/acaptcha/acaptcha/peer"
)

// natOptions are the NAT-traversal flags (--nat, --relay, --relay-service)
// of every command that starts a node.
type natOptions struct {
	enable       bool
	relays       []string
	relayService bool
}

// check validates the flags before anything is opened.
func (o natOptions) check() error {
	if _, err := peer.ParseRelays(o.relays); err != nil {
		return usageErr("--relay: %v", err)
	}
	return nil
}

// apply sets the NAT settings of cfg.
func (o natOptions) apply(cfg *peer.Config) {
	cfg.NAT = o.enable
	cfg.Relays = o.relays
	cfg.RelayService = o.relayService
}

// startLines are the node's start-up lines about relaying: that it
// relays for others (--relay-service) and through which relays it can be
// reached when behind a NAT (--relay). Neither is said otherwise, and a
// relay costs its operator bandwidth.
func (o natOptions) startLines() []string {
	var lines []string
	if o.relayService {
		r := peer.RelayServiceResources()
		lines = append(lines, fmt.Sprintf("relays for others once AutoNAT finds this node publicly reachable (--relay-service: circuit v2, %d reservations, %d circuits per peer, each relayed connection cut after %s or %d KiB)",
			r.MaxReservations, r.MaxCircuits, r.Limit.Duration, r.Limit.Data/1024))
	}
	if n := len(o.relays); n > 0 {
		lines = append(lines, fmt.Sprintf("reserves a slot with %d static relay(s) when AutoNAT finds this node unreachable, and is reached through them (--relay)", n))
	}
	return lines
}
