package peer_test

import (
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// TestLibrarySafeByDefaultBeyondLoopback: the library's zero Config asked
// no base proof of work, no verifier payment and answered every verifier
// that came to it whatever the node listened on, while `acaptcha node`
// turns all three on when the node is reachable beyond loopback: a
// library node on 0.0.0.0 let fresh peer IDs draw sets and make its LLM
// answer for nothing. The library now decides as the CLI (resolved by
// New, read back from the service's config; nothing is dialed):
// protocol.PublicPowDifficulty and verify-first beyond loopback (or with
// a relay), none on loopback only, and the explicit forms (protocol.NoPow,
// peer.NoPay, AnswerFirst; explicit bits, VerifyFirst) win either way.
func TestLibrarySafeByDefaultBeyondLoopback(t *testing.T) {
	const (
		anywhere = "/ip4/0.0.0.0/tcp/0"
		loopback = "/ip4/127.0.0.1/tcp/0"
		relay    = "/ip4/192.0.2.7/tcp/4001/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"
		public   = protocol.PublicPowDifficulty
	)
	for _, tc := range []struct {
		name        string
		listen      string
		relays      []string
		limits      peer.Limits
		verifyFirst bool
		answerFirst bool
		// want: the service's base D (protocol.NoPow: none), payment
		// (0: none) and verify-first.
		pow, pay int
		vf       bool
	}{
		{name: "all interfaces", listen: anywhere, pow: public, pay: public, vf: true},
		{name: "loopback only", listen: loopback, pow: protocol.NoPow, pay: 0, vf: false},
		{name: "loopback with a relay", listen: loopback, relays: []string{relay}, pow: public, pay: public, vf: true},
		{name: "all interfaces, explicit none", listen: anywhere, limits: peer.Limits{PowDifficulty: protocol.NoPow, PayDifficulty: peer.NoPay}, answerFirst: true,
			pow: protocol.NoPow, pay: 0, vf: false},
		{name: "all interfaces, explicit bits", listen: anywhere, limits: peer.Limits{PowDifficulty: 4, PayDifficulty: 6}, pow: 4, pay: 6, vf: true},
		{name: "loopback only, explicit on", listen: loopback, limits: peer.Limits{PowDifficulty: 8, PayDifficulty: 10}, verifyFirst: true,
			pow: 8, pay: 10, vf: true},
		{name: "loopback only, explicit none", listen: loopback, limits: peer.Limits{PowDifficulty: protocol.NoPow, PayDifficulty: peer.NoPay}, answerFirst: true,
			pow: protocol.NoPow, pay: 0, vf: false},
		{name: "VerifyFirst wins over AnswerFirst", listen: loopback, verifyFirst: true, answerFirst: true, pow: protocol.NoPow, pay: 0, vf: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _, err := crypto.GenerateEd25519Key(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			n, err := peer.New(peer.Config{Key: key, StorePath: filepath.Join(t.TempDir(), "n.db"), ListenAddrs: []string{tc.listen}, Relays: tc.relays,
				Limits: tc.limits, VerifyFirst: tc.verifyFirst, AnswerFirst: tc.answerFirst, Policy: skill.DefaultPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			c := n.ProtocolConfig()
			if c.PowDifficulty != tc.pow || c.PayDifficulty != tc.pay || c.VerifyFirst != tc.vf {
				t.Errorf("base D %d, payment %d, verify first %v; want %d, %d, %v", c.PowDifficulty, c.PayDifficulty, c.VerifyFirst, tc.pow, tc.pay, tc.vf)
			}
		})
	}
}

// Limits.Check takes NoPay (and protocol.NoPow) as none and refuses
// anything below them.
func TestLimitsNoPay(t *testing.T) {
	if err := (peer.Limits{PowDifficulty: protocol.NoPow, PayDifficulty: peer.NoPay}).Check(); err != nil {
		t.Errorf("NoPow, NoPay: %v", err)
	}
	if err := (peer.Limits{PayDifficulty: peer.NoPay - 1}).Check(); err == nil || !strings.Contains(err.Error(), "verifier payment") {
		t.Errorf("payment %d: %v", peer.NoPay-1, err)
	}
	if err := (peer.Limits{PowDifficulty: protocol.NoPow - 1}).Check(); err == nil || !strings.Contains(err.Error(), "proof-of-work") {
		t.Errorf("proof of work %d: %v", protocol.NoPow-1, err)
	}
}
