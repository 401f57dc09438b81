package mcpserver_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
)

// An attest_peer that runs out of its time limit says which limit it
// was, foreground and background: a silent peer gave "failed to dial:
// context deadline exceeded", naming neither timeout_seconds nor the
// limit, where `acaptcha attest` names its --timeout.
func TestAttestTimeoutNamesItsLimit(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	})
	_, sets, _ := splitSets(t)
	srv, err := mcpserver.New(mcpserver.Config{Node: startNode(t, sets, nil), Version: "test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cs := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	addr := "/ip4/127.0.0.1/tcp/" + port + "/p2p/12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"
	want := "timeout_seconds 0.5"
	_, err = call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": addr, "timeout_seconds": 0.5})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("foreground attest_peer of a silent peer: %v, want an error naming %q", err, want)
	}
	// Another peer ID at the same address: whether the first dial left
	// libp2p's dial backoff on (peer, address) depends on which of the
	// dial's and the call's deadlines fired first, and a backoff would
	// answer the second call without dialing (peer.ConnectError says so).
	addr = "/ip4/127.0.0.1/tcp/" + port + "/p2p/" + testutil.NewPeerID(t).String()
	job, err := call[mcpserver.AttestOutput](ctx, cs, "attest_peer", map[string]any{"addr": addr, "timeout_seconds": 0.5, "background": true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := call[mcpserver.AttestOutput](ctx, cs, "attest_status", map[string]any{"job_id": job.JobID, "wait_ms": 30000})
	if err != nil || st.Status != "failed" || !strings.Contains(st.Error, want) {
		t.Errorf("background attest_peer of a silent peer: %+v, %v; want failed, naming %q", st, err, want)
	}
}
