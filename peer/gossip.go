package peer

import "github.com/acaptcha/acaptcha/protocol"

// Attestation sharing over GossipSub. Placeholder.

type gossipState struct{}

func (n *Node) startGossip() error                    { return nil }
func (n *Node) stopGossip()                           {}
func (n *Node) afterIssued(r *protocol.Result)        {}
func (n *Node) afterReceived(r protocol.ProverResult) {}
