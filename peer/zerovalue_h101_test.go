package peer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/pool"
)

// TestNewRefusesInvalidConfig (helper-101's audit of a library user's
// zero and invalid values): New took a negative count or duration
// silently (RetryRejected, MaxConcurrentAttest, ConnsPerIP, ... became
// their defaults; TrustQuorum and BlockRejected turned the feature off),
// never called Limits.Check (a PowDifficulty of 30 bits was lowered to
// the node's 22), and took a SourceKind with no rank, which left the
// source unknown to the start-up warning and first contact. Each is now
// an error naming the field, before anything is opened.
func TestNewRefusesInvalidConfig(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		set   func(*peer.Config)
		field string
	}{
		{"negative MutualTimeout", func(c *peer.Config) { c.MutualTimeout = -time.Second }, "MutualTimeout"},
		{"negative RetryRejected", func(c *peer.Config) { c.RetryRejected = -time.Hour }, "RetryRejected"},
		// helper-113: 48 h was cut to 24 h for the doubling back-off and
		// kept whole for a stored rejection after a restart.
		{"RetryRejected above its maximum", func(c *peer.Config) { c.RetryRejected = peer.MaxRetryRejected + time.Hour }, "RetryRejected"},
		{"negative ReattestBefore", func(c *peer.Config) { c.ReattestBefore = -time.Hour }, "ReattestBefore"},
		{"negative BlockRejected", func(c *peer.Config) { c.BlockRejected = -time.Minute }, "BlockRejected"},
		{"negative ConnGracePeriod", func(c *peer.Config) { c.ConnGracePeriod = -time.Second }, "ConnGracePeriod"},
		{"negative MaxConcurrentAttest", func(c *peer.Config) { c.MaxConcurrentAttest = -1 }, "MaxConcurrentAttest"},
		{"negative TrustQuorum", func(c *peer.Config) { c.TrustQuorum = -2 }, "TrustQuorum"},
		{"unreachable TrustQuorum", func(c *peer.Config) { c.TrustQuorum = 1 << 30 }, "TrustQuorum"},
		{"negative ConnLowWater", func(c *peer.Config) { c.ConnLowWater = -1 }, "ConnLowWater"},
		{"negative ConnHighWater", func(c *peer.Config) { c.ConnHighWater = -1 }, "ConnHighWater"},
		{"negative ConnsPerIP", func(c *peer.Config) { c.ConnsPerIP = -1 }, "ConnsPerIP"},
		{"negative NewConnsPerSecond", func(c *peer.Config) { c.NewConnsPerSecond = -1 }, "NewConnsPerSecond"},
		{"SourceKind with no rank", func(c *peer.Config) { c.SourceKind = "LLM-written" }, "SourceKind"},
		{"Limits: negative draws", func(c *peer.Config) { c.Limits.MaxPaySolves = -1 }, "Limits"},
		{"Limits: pow above the node's maximum", func(c *peer.Config) { c.Limits.PowDifficulty = protocol.DefaultMaxPowDifficulty + 8 }, "Limits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n.db")
			cfg := peer.Config{Key: key, StorePath: path, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}}
			tc.set(&cfg)
			n, err := peer.New(cfg)
			if err == nil {
				n.Close()
				t.Fatalf("New accepted it")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("New left a store behind")
			}
		})
	}
}

// procProducer is a pool producer of procedural kind that produces
// nothing until its context ends.
type procProducer struct{}

func (procProducer) Produce(ctx context.Context) (*skill.Set, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (procProducer) Kind() skill.SourceKind { return skill.SourceProcedural }

// TestNodeKnowsPoolKind: a library node serving a pool.Pool without
// Config.SourceKind took its challenges for an unknown source (the pool
// reported no kind), so a pool of procedural sets, which a script parses
// back, started without the warning the CLI's node gives. The pool now
// reports its producer's kind.
func TestNodeKnowsPoolKind(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(pool.Config{}, procProducer{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := peer.New(peer.Config{Key: key, StorePath: filepath.Join(t.TempDir(), "n.db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Source: p, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "procedural generator") {
		t.Errorf("no warning about the procedural source at start; logs:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
