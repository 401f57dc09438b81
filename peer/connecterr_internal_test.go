package peer

import (
	"errors"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// A connection libp2p refused to dial because a dial to the same address
// failed moments ago says so, where the bare "dial backoff" read as the
// peer's fault; other dial errors keep their own text. Both are ErrNetwork.
func TestConnectErrorNamesDialBackoff(t *testing.T) {
	id := testutil.NewPeerID(t)
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/4001")
	backoff := &swarm.DialError{Peer: id, DialErrors: []swarm.TransportError{{Address: addr, Cause: swarm.ErrDialBackoff}}}
	refused := &swarm.DialError{Peer: id, DialErrors: []swarm.TransportError{{Address: addr, Cause: errors.New("connection refused")}}}

	err := ConnectError(id, backoff)
	if !errors.Is(err, ErrNetwork) || !errors.Is(err, swarm.ErrDialBackoff) {
		t.Errorf("ConnectError(backoff) = %v: want ErrNetwork and swarm.ErrDialBackoff wrapped", err)
	}
	if !strings.Contains(err.Error(), "failed moments ago") || !strings.Contains(err.Error(), id.String()) {
		t.Errorf("ConnectError(backoff) = %q: want the peer and why nothing was dialed", err)
	}
	err = ConnectError(id, refused)
	if !errors.Is(err, ErrNetwork) || strings.Contains(err.Error(), "moments ago") {
		t.Errorf("ConnectError(refused) = %q: want ErrNetwork and no backoff sentence", err)
	}
}
