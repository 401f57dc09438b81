package peer

import (
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Door is what a node gives a front door that runs verifier sessions of
// its own over another transport (the HTTP gateway, peer/httpgw): the
// node's policy and identity, and the node's handling of the results, so
// that a record issued through the door is stored, indexed, counted and
// gossiped exactly like one issued over libp2p.
type Door struct{ n *Node }

// Door returns the node's door for front doors.
func (n *Node) Door() Door { return Door{n: n} }

// Verifier is the node's transport-free verifier (the one its libp2p
// protocol runs over: budgets, payment, reflection guard and signing key
// are shared); nil when the node has no challenge source.
func (d Door) Verifier() *protocol.Verifier {
	if d.n.cfg.Source == nil {
		return nil
	}
	return d.n.svc.Core()
}

// Self is the node's peer ID (the issuer of its attestations).
func (d Door) Self() peer.ID { return d.n.host.ID() }

// Policy is the node's verifier policy.
func (d Door) Policy() skill.Policy { return d.n.cfg.Policy }

// Addrs are the node's libp2p addresses with their /p2p/ component.
func (d Door) Addrs() []ma.Multiaddr { return d.n.Addrs() }

// RequireSource is the node's admission minimum (Config.RequireSource).
func (d Door) RequireSource() skill.SourceKind { return d.n.RequireSource() }

// Issued records the result of a session the door ran, as the node
// records its own verifications (recordIssued): the signed record is
// stored as issued, indexed for trust, gossiped when accepted (a rejection
// that supersedes an acceptance too), counted in the metrics, and a
// rejected peer is blocked when the node is configured to. A peer that is
// not connected over libp2p is not tagged in the connection manager (the
// tag would only take a slot of the manager's table).
func (d Door) Issued(r *protocol.Result) { d.n.recordIssued(r, "http") }
