// Package testnode is the one factory of acaptcha nodes for tests: a
// node on loopback with a fresh key, a store in the test's temporary
// directory, a quiet logger, and optionally a challenge corpus and a
// prover answering through the real langchaingo OpenAI client against a
// local test brain (internal/testutil). It lives apart from testutil
// because it imports peer, which peer's own internal tests cannot do.
package testnode

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/solve"
)

// Options describe a test node. Config is the base: fields left zero get
// the test defaults (Key: a fresh Ed25519 key; StorePath: a file in the
// test's temporary directory unless Store is set; ListenAddrs: loopback
// TCP on a free port; Logger: discarding; Policy: skill.DefaultPolicy).
type Options struct {
	Config peer.Config
	// Sets, when given and Config.Source is nil, become the node's
	// challenge corpus (each set served up to 1,000 times).
	Sets []*skill.Set
	// Brain, when given and Config.Prover is nil, answers the node's
	// challenges through an OpenAI-compatible test server; Memory keeps
	// the session's earlier rounds in the conversation.
	Brain  testutil.Brain
	Memory bool
}

// New starts a node for t and closes it when t ends.
func New(t testing.TB, o Options) *peer.Node {
	t.Helper()
	cfg := o.Config
	if cfg.Key == nil && cfg.KeyFile == "" {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Key = k
	}
	if cfg.Store == nil && cfg.StorePath == "" {
		cfg.StorePath = filepath.Join(t.TempDir(), "store.db")
	}
	if len(cfg.ListenAddrs) == 0 {
		cfg.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Policy.Rounds == 0 {
		cfg.Policy = skill.DefaultPolicy()
	}
	if cfg.Source == nil && len(o.Sets) > 0 {
		src, err := skill.NewCorpus("test", o.Sets, nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Source = src
	}
	if cfg.Prover == nil && o.Brain != nil {
		srv := testutil.NewOpenAIServer(o.Brain)
		t.Cleanup(srv.Close)
		m, err := llm.New(context.Background(), llm.Config{Spec: "openai:stub-model", BaseURL: srv.URL + "/v1", APIKey: "test"})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Prover = solve.New(m, solve.Config{Memory: o.Memory})
	}
	n, err := peer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// AddrInfo is how other nodes dial n.
func AddrInfo(n *peer.Node) lpeer.AddrInfo {
	return lpeer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}
}
