package peer_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/internal/testutil/testnode"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/store"
)

// holdHandler is a slog handler that holds the goroutine logging msg,
// once, until release is closed; held is closed when it does.
type holdHandler struct {
	msg     string
	held    chan struct{}
	release chan struct{}
	once    *sync.Once
}

func (h holdHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h holdHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() {
			close(h.held)
			<-h.release
		})
	}
	return nil
}
func (h holdHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h holdHandler) WithGroup(string) slog.Handler      { return h }

// A verifier session that has its verdict (signed and delivered to the
// peer) when Close is called has its record stored before Close closes
// the store: Verify returns the attestation, and the store holds it.
func TestCloseStoresVerdictInHand(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	h := holdHandler{msg: "verified peer", held: make(chan struct{}), release: make(chan struct{}), once: new(sync.Once)}
	path := filepath.Join(t.TempDir(), "v.db")
	v := testnode.New(t, testnode.Options{Sets: sets, Config: peer.Config{StorePath: path, Logger: slog.New(h)}})
	b := testnode.New(t, testnode.Options{Brain: oracle, Memory: true, Sets: sets})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := v.Host().Connect(ctx, addrInfo(b)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		accepted, signed bool
		err              error
	}
	done := make(chan result, 1)
	go func() {
		res, err := v.Verify(ctx, b.ID())
		r := result{err: err}
		if res != nil {
			r.accepted, r.signed = res.Verdict.Accepted, res.Attestation != nil
		}
		done <- r
	}()
	waitClosed(t, h.held, 30*time.Second, "the verdict")
	closed := make(chan error, 1)
	go func() { closed <- v.Close() }()
	// Close may wait for the verdict to be stored; give it the time it
	// would take to close everything otherwise.
	select {
	case err := <-closed:
		close(h.release)
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		close(h.release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
	}
	r := <-done
	if r.err != nil || !r.signed {
		t.Fatalf("Verify: %v (signed %v)", r.err, r.signed)
	}
	st, err := store.OpenWith(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if es, err := st.List(peer.Issued, b.ID()); err != nil || len(es) != 1 {
		t.Fatalf("the verifier's store holds %d records of the verdict Verify returned (%v), want 1", len(es), err)
	}
}
