package peer

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	wirepb "github.com/acaptcha/acaptcha/protocol/pb"
)

// The node's answers to reciprocal requests (spec/protocol.md §1a): WILL
// only when a session back runs or will run, otherwise the reason the
// request is dropped, including the cases where the first-contact worker
// would run no session (admitted through the quorum, revoked, blocked, a
// standing weak acceptance).
func TestReciprocalAnswers(t *testing.T) {
	n := newExampleNode(t)
	_, p := testutil.NewKey(t)
	_, q := testutil.NewKey(t)
	_, r := testutil.NewKey(t)

	if got := n.onReciprocal(n.ID(), true); got != wirepb.Reciprocal_RECIPROCAL_NOT_OFFERED {
		t.Errorf("a request from ourselves: %v, want NOT_OFFERED", got)
	}
	if got := n.onReciprocal(p, false); got != wirepb.Reciprocal_RECIPROCAL_BUSY {
		t.Errorf("no draws left: %v, want BUSY", got)
	}
	// A session of ours to the peer runs: its verdict comes whatever the
	// draws say.
	n.mu.Lock()
	n.inflight[q] = &call{started: time.Now(), done: make(chan struct{})}
	n.mu.Unlock()
	if got := n.onReciprocal(q, false); got != wirepb.Reciprocal_RECIPROCAL_WILL {
		t.Errorf("a session running, no draws left: %v, want WILL", got)
	}
	n.mu.Lock()
	delete(n.inflight, q)
	n.mu.Unlock()
	n.contact.mu.Lock()
	n.contact.backoff[r] = &contactBackoff{until: time.Now().Add(time.Hour), reason: "test"}
	n.contact.mu.Unlock()
	if got := n.onReciprocal(r, true); got != wirepb.Reciprocal_RECIPROCAL_BACKING_OFF {
		t.Errorf("backing off: %v, want BACKING_OFF", got)
	}

	// A session of ours to the peer has ended (its verdict is sent) and
	// is being recorded when the peer asks: no WILL, whose session would
	// never come, but the answer once the record is in (here a back-off
	// the recording sets).
	_, s := testutil.NewKey(t)
	ended := &call{started: time.Now(), done: make(chan struct{})}
	ended.ended.Store(true)
	n.mu.Lock()
	n.inflight[s] = ended
	n.mu.Unlock()
	go func() {
		time.Sleep(50 * time.Millisecond)
		n.contact.mu.Lock()
		n.contact.backoff[s] = &contactBackoff{until: time.Now().Add(time.Hour), reason: "rejected"}
		n.contact.mu.Unlock()
		n.mu.Lock()
		delete(n.inflight, s)
		n.mu.Unlock()
		close(ended.done)
	}()
	if got := n.onReciprocal(s, true); got != wirepb.Reciprocal_RECIPROCAL_BACKING_OFF {
		t.Errorf("a session that ended while being recorded: %v, want BACKING_OFF", got)
	}

	// The session that just ended was run by the peer's own first-contact
	// worker, which still exists for a moment after the record is in:
	// the answer comes from the record (here: the operator revoked the
	// peer meanwhile), not WILL on account of that exiting worker.
	_, v := testutil.NewKey(t)
	if err := n.Revoke(v); err != nil {
		t.Fatal(err)
	}
	byWorker := &call{started: time.Now(), done: make(chan struct{})}
	byWorker.ended.Store(true)
	close(byWorker.done)
	n.mu.Lock()
	n.inflight[v] = byWorker
	n.mu.Unlock()
	n.contact.mu.Lock()
	n.contact.active[v] = true
	n.contact.mu.Unlock()
	if got := n.onReciprocal(v, true); got != wirepb.Reciprocal_RECIPROCAL_NOT_OFFERED {
		t.Errorf("a session its worker just ended, the peer revoked: %v, want NOT_OFFERED", got)
	}
	n.mu.Lock()
	delete(n.inflight, v)
	n.mu.Unlock()
	n.contact.mu.Lock()
	delete(n.contact.active, v)
	delete(n.contact.recip, v)
	n.contact.mu.Unlock()

	// A worker of the peer exists, running no session of ours, and would
	// run none (here: the operator revoked the peer; in the field, the
	// trust quorum admitting it while the worker waits for it): the
	// answer comes from the peer's standing, not WILL on account of the
	// worker (spec §1a: WILL only when a session back will run).
	_, x := testutil.NewKey(t)
	if err := n.Revoke(x); err != nil {
		t.Fatal(err)
	}
	n.contact.mu.Lock()
	n.contact.active[x] = true
	n.contact.mu.Unlock()
	if got := n.onReciprocal(x, true); got != wirepb.Reciprocal_RECIPROCAL_NOT_OFFERED {
		t.Errorf("a worker that will run no session, the peer revoked: %v, want NOT_OFFERED", got)
	}
	n.contact.mu.Lock()
	delete(n.contact.active, x)
	delete(n.contact.recip, x)
	n.contact.mu.Unlock()

	// The session has its verdict (OnVerdict, before the write) and is
	// not recorded within the wait: the verdict's record is the answer,
	// never WILL.
	_, u := testutil.NewKey(t)
	slow := &call{started: time.Now(), done: make(chan struct{})}
	n.mu.Lock()
	n.inflight[u] = slow
	n.mu.Unlock()
	n.onVerdict(u, &protocol.Result{Attestation: &protocol.Attestation{}})
	if !slow.ended.Load() {
		t.Fatal("OnVerdict did not mark the session as having its verdict")
	}
	if got := n.onReciprocal(u, true); got != wirepb.Reciprocal_RECIPROCAL_ATTESTED {
		t.Errorf("a session with its verdict, not yet recorded: %v, want ATTESTED", got)
	}
	n.mu.Lock()
	delete(n.inflight, u)
	n.mu.Unlock()
	close(slow.done)
	if got := n.onReciprocal(p, true); got != wirepb.Reciprocal_RECIPROCAL_WILL {
		t.Errorf("a fresh peer with draws left: %v, want WILL", got)
	}

	// At the bound on first-contact workers a request is BUSY, not a
	// worker more (fresh peer IDs are free).
	n.contact.mu.Lock()
	var fillers []peer.ID
	// As many fillers as the bound: workers started above may end
	// meanwhile and remove themselves, never a filler.
	for len(fillers) < maxContactWorkers {
		_, f := testutil.NewKey(t)
		n.contact.active[f] = true
		fillers = append(fillers, f)
	}
	n.contact.mu.Unlock()
	_, w := testutil.NewKey(t)
	if got := n.onReciprocal(w, true); got != wirepb.Reciprocal_RECIPROCAL_BUSY {
		t.Errorf("%d workers exist: %v, want BUSY", maxContactWorkers, got)
	}
	n.contact.mu.Lock()
	for _, f := range fillers {
		delete(n.contact.active, f)
	}
	n.contact.mu.Unlock()

	for _, tc := range []struct {
		adm  Admission
		want wirepb.Reciprocal
	}{
		{Admission{Admitted: true, Via: "quorum"}, wirepb.Reciprocal_RECIPROCAL_ADMITTED},
		{Admission{Admitted: true, Via: AdmittedDirect}, wirepb.Reciprocal_RECIPROCAL_ATTESTED},
		{Admission{Reason: NotAdmittedSource}, wirepb.Reciprocal_RECIPROCAL_ATTESTED},
		{Admission{Reason: NotAdmittedRevoked}, wirepb.Reciprocal_RECIPROCAL_NOT_OFFERED},
		{Admission{Reason: NotAdmittedBlocked}, wirepb.Reciprocal_RECIPROCAL_NOT_OFFERED},
		{Admission{Reason: NotAdmittedRejected}, wirepb.Reciprocal_RECIPROCAL_BACKING_OFF},
	} {
		if got := reciprocalDropReason(tc.adm); got != tc.want {
			t.Errorf("reciprocalDropReason(%+v) = %v, want %v", tc.adm, got, tc.want)
		}
	}
}
