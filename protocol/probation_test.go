package protocol

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A budget group in probation (spec §6 step 1) is one the node shares
// with whoever else sends from it: a cloud /24, a CGNAT address, and for
// a node reachable only through a relay, every verifier it has. Before,
// probation gave the group's untrusted peers one inbound slot between
// them, and a silent stream held it for the hello timeout: one attacker
// of the group that reopened a silent stream whenever the last one ended
// (one stream at a time, nothing else sent) kept every honest verifier of
// its group out, where without probation it needed sixteen. Probation
// bounds the group's streams that wait for their hello to one, and a
// newer stream of the group takes that place from the older; a stream
// with a valid hello has the group's usual slots.
func TestProbationSilentHolderDoesNotLockOutItsGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback run of several hello timeouts")
	}
	var seeds []string
	for _, s := range []string{"a", "b", "c", "d", "e", "f"} {
		seeds = append(seeds, "probation-"+s)
	}
	src := sourceOf(seeds...)
	p := hostAt(t, "127.0.0.1")
	const hello = time.Second
	svc := newService(t, p, Config{Prover: oracleProver(0, src.sets...), LimitLoopback: true, HelloTimeout: hello})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(h host.Host) {
		t.Helper()
		if err := h.Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	pfx := netip.MustParsePrefix("127.0.1.0/24")

	// The attacker shares the honest verifier's /24: two peer IDs put
	// the group in probation with SilentStrikes silent streams.
	m1, m2 := hostAt(t, "127.0.1.1"), hostAt(t, "127.0.1.3")
	connect(m1)
	connect(m2)
	var wg sync.WaitGroup
	for i := range SilentStrikes {
		m := m1
		if i%2 == 1 {
			m = m2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			silentStream(t, ctx, m, p)
		}()
	}
	wg.Wait()
	waitFor(t, "the group's probation", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.inProbationLocked(pfx, svc.now())
	})

	// Then one silent stream at a time, reopened as soon as it ends.
	var opened atomic.Int64
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var attacker sync.WaitGroup
	attacker.Add(1)
	go func() {
		defer attacker.Done()
		for i := 0; i < 200 && actx.Err() == nil; i++ {
			s, err := m1.NewStream(actx, p.ID(), ID)
			if err != nil {
				return
			}
			opened.Add(1)
			_ = s.SetReadDeadline(time.Now().Add(3 * hello))
			_, _ = io.Copy(io.Discard, s)
			_ = s.Reset()
		}
	}()
	waitFor(t, "the attacker's stream to hold the group's slot", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.perPrefix[pfx] == 1
	})

	// An honest verifier of the same /24, which the node does not admit
	// (first contact), tries to verify it.
	v := hostAt(t, "127.0.1.2")
	vs := newService(t, v, Config{Source: src, LimitLoopback: true})
	connect(v)
	// Each try is retried up to 3 times when busy, as a verifier
	// retries (a newer stream of the attacker can still win the race
	// against an honest hello being read, on a loaded machine).
	const tries = 4
	served, attempts := 0, 0
	var last error
	start := time.Now()
	for range tries {
		for range 3 {
			attempts++
			res, err := vs.Verify(ctx, p.ID(), false)
			if err == nil && res.Verdict.Accepted {
				served++
				break
			}
			if err == nil {
				last = errors.New(string(res.Verdict.Reason))
			} else {
				last = err
			}
			time.Sleep(hello / 4)
		}
		time.Sleep(hello / 4)
	}
	stop()
	attacker.Wait()
	t.Logf("attacker: %d silent streams (one at a time) in %v; honest verifier of its /24: %d of %d sessions served in %d attempts (last error: %v)",
		opened.Load(), time.Since(start).Round(time.Millisecond), served, tries, attempts, last)
	if served != tries {
		t.Fatalf("an attacker holding one silent stream at a time kept its group's honest verifier out: %d of %d served (%v)", served, tries, last)
	}
	// The group stays in probation: the attacker's streams that the
	// honest ones displaced counted as silent.
	svc.mu.Lock()
	in := svc.inProbationLocked(pfx, svc.now())
	svc.mu.Unlock()
	if !in {
		t.Fatal("the group left probation")
	}
}
