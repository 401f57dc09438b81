package main

import "github.com/acaptcha/acaptcha/peer"

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
