package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

func peersMain(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

func testKey(t *testing.T) (crypto.PrivKey, lpeer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := lpeer.IDFromPrivateKey(k)
	return k, id
}

// sealAccepted signs an acceptance of subject by key's peer on LLM-written
// challenges.
func sealAccepted(t *testing.T, key crypto.PrivKey, subject lpeer.ID) (*protocol.Attestation, []byte) {
	t.Helper()
	return sealAcceptedFrom(t, key, subject, skill.SourceLLM)
}

// sealAcceptedFrom signs an acceptance on challenges from src.
func sealAcceptedFrom(t *testing.T, key crypto.PrivKey, subject lpeer.ID, src skill.SourceKind) (*protocol.Attestation, []byte) {
	t.Helper()
	issuer, _ := lpeer.IDFromPrivateKey(key)
	now := time.Now().UTC().Truncate(time.Second)
	a := &protocol.Attestation{
		Issuer: issuer, Subject: subject, Accepted: true, Reason: skill.ReasonOK,
		Nonce: make([]byte, protocol.NonceBytes), TranscriptDigest: make([]byte, protocol.DigestBytes),
		Policy:   protocol.PolicySummary{Rounds: 3, Tau: 15 * time.Second, Total: 2 * time.Minute},
		IssuedAt: now, ExpiresAt: now.Add(time.Hour), SpecVersion: protocol.SpecVersion,
		Provenance: skill.Provenance{Source: src},
	}
	_, _ = rand.Read(a.Nonce)
	for i := 1; i <= 3; i++ {
		a.Rounds = append(a.Rounds, protocol.RoundTiming{Round: i, Budget: 15 * time.Second, Effective: time.Second, Correct: true})
	}
	env, err := protocol.Seal(a, key)
	if err != nil {
		t.Fatal(err)
	}
	return a, env
}

func TestPeersFromStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	selfKey, self := testKey(t)
	_, direct := testKey(t)
	issuerKey, issuer := testKey(t)
	_, subject := testKey(t)
	_, revoked := testKey(t)
	for _, p := range []lpeer.ID{direct, issuer, revoked} {
		a, env := sealAccepted(t, selfKey, p)
		if err := st.Put(peer.Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	a, env := sealAccepted(t, issuerKey, subject)
	if err := st.PutLearned(peer.Learned{Attestation: a, Envelope: env, Via: peer.ViaPresentation, From: subject, LearnedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRevocation(revoked, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	out, errOut, code := peersMain(t, context.Background(), "peers", "--store", path, "--trust-quorum", "1", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep peersReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Self != self.String() || rep.Source != "store" || len(rep.Peers) != 4 {
		t.Fatalf("report: %+v", rep)
	}
	byID := map[lpeer.ID]peer.PeerInfo{}
	for _, p := range rep.Peers {
		byID[p.Peer] = p
	}
	if adm := byID[direct].Admission; !adm.Admitted || adm.Via != peer.AdmittedDirect {
		t.Fatalf("direct: %+v", adm)
	}
	if adm := byID[revoked].Admission; adm.Admitted || adm.Reason != peer.NotAdmittedRevoked {
		t.Fatalf("revoked: %+v", adm)
	}
	s := byID[subject]
	if !s.Admission.Admitted || s.Admission.Via != peer.AdmittedQuorum || len(s.Vouchers) != 1 || s.Vouchers[0].Source != peer.SourcePresentation || !s.Vouchers[0].Counts {
		t.Fatalf("quorum: %+v", s)
	}
	// Without a quorum the subject is not admitted: --peer prints it and
	// exits 1, so `peers --peer X && ...` goes on only for admitted peers.
	out, _, code = peersMain(t, context.Background(), "peers", "--store", path, "--peer", subject.String())
	if code != exitRejected || !strings.Contains(out, "NOT ADMITTED (unattested)") || !strings.Contains(out, "presentation from") || strings.Contains(out, "counts") {
		t.Fatalf("text output (exit %d):\n%s", code, out)
	}
	if _, errOut, code := peersMain(t, context.Background(), "peers", "--store", path, "--peer", direct.String()); code != exitOK {
		t.Fatalf("--peer of an admitted peer: exit %d: %s", code, errOut)
	}
	// A peer the store knows nothing of is named as unknown, not "no
	// peers" (the store has peers), and is not admitted.
	_, stranger := testKey(t)
	out, _, code = peersMain(t, context.Background(), "peers", "--store", path, "--peer", stranger.String())
	if code != exitRejected || !strings.Contains(out, stranger.String()+" is unknown here") || strings.Contains(out, "no peers") {
		t.Fatalf("--peer of an unknown peer (exit %d):\n%s", code, out)
	}
	if _, _, code := peersMain(t, context.Background(), "peers", "--store", path, "--node", "127.0.0.1:9"); code != exitUsage {
		t.Fatalf("--node with --store: exit %d, want %d", code, exitUsage)
	}
	// The running node evaluates admissions under its own flags: these
	// were ignored silently with --node.
	for _, f := range [][]string{{"--trust-quorum", "3"}, {"--require-source", "any"}} {
		if _, errOut, code := peersMain(t, context.Background(), append([]string{"peers", "--node", "127.0.0.1:9"}, f...)...); code != exitUsage || !strings.Contains(errOut, f[0]) {
			t.Fatalf("--node with %s: exit %d, want %d: %s", f[0], code, exitUsage, errOut)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestNodeServesMetricsAndPeers(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var nodeErr bytes.Buffer
	startOut := &lineWriter{line: make(chan string, 1)}
	go func() {
		done <- Main(ctx, []string{"node", "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"),
			"--listen", "/ip4/127.0.0.1/tcp/0", "--metrics", addr, "--trust-quorum", "2", "--json"}, startOut, &nodeErr)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("node did not stop")
		}
	}()
	// The start-up object names the metrics endpoint.
	select {
	case l := <-startOut.line:
		var info struct {
			Metrics string `json:"metrics"`
		}
		if err := json.Unmarshal([]byte(l), &info); err != nil || info.Metrics != "http://"+addr+"/metrics" {
			t.Errorf("node --json start-up line %q (%v): want metrics http://%s/metrics", l, err, addr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node printed no start-up line")
	}
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never served: %v\n%s", err, nodeErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"acaptcha_pool_depth", "acaptcha_gossip_published_total", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, body)
		}
	}
	out, errOut, code := peersMain(t, context.Background(), "peers", "--node", addr, "--json")
	if code != exitOK {
		t.Fatalf("peers --node: exit %d: %s", code, errOut)
	}
	var rep peersReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Source != "node" || rep.TrustQuorum != 2 || rep.RequireSource != skill.SourceHybrid || rep.Self == "" || rep.Stats == nil {
		t.Fatalf("live report: %+v", rep)
	}
	// The store is locked while the node runs: a runtime failure (exit 1,
	// not a usage error), and the error says what to do.
	_, errOut, code = peersMain(t, context.Background(), "peers", "--store", filepath.Join(dir, "db"))
	if code != exitFailure || !strings.Contains(errOut, "--node") {
		t.Fatalf("locked store: exit %d: %s", code, errOut)
	}
}

// A store with no record yet still names its node when the key file
// beside it (the data directory's layout) is there; peers makes none.
func TestPeersSelfFromKeyFile(t *testing.T) {
	dir := t.TempDir()
	path, keyPath := filepath.Join(dir, "db"), filepath.Join(dir, "key")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	k, err := peer.LoadOrCreateKey(keyPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := lpeer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := peersMain(t, context.Background(), "peers", "--store", path, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep peersReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Self != id.String() {
		t.Fatalf("self %q, want %s", rep.Self, id)
	}
	// No key file: no self, and none made.
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = peersMain(t, context.Background(), "peers", "--store", path, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep2 peersReport
	if err := json.Unmarshal([]byte(out), &rep2); err != nil || rep2.Self != "" {
		t.Fatalf("self %q without a key file (%v)", rep2.Self, err)
	}
	if _, err := os.Stat(keyPath); err == nil {
		t.Fatal("peers made a key file")
	}
}

// A node that serves a set more than once (--max-serves above 1) says at
// start that a script keeping verdicts across sessions learns such a set;
// at the default, one serve, it says nothing.
func TestNodeWarnsMaxServesReuse(t *testing.T) {
	const warn = "can be learned by a script across sessions"
	run := func(args ...string) string {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, errOut, code := peersMain(t, ctx, append([]string{"node", "--challenges", "examples", "--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"),
			"--listen", "/ip4/127.0.0.1/tcp/0"}, args...)...)
		if code != exitOK {
			t.Fatalf("node exit %d: %s", code, errOut)
		}
		return errOut
	}
	if out := run("--max-serves", "1000"); !strings.Contains(out, warn) {
		t.Fatalf("no warning for --max-serves 1000:\n%s", out)
	}
	if out := run(); strings.Contains(out, warn) {
		t.Fatalf("warning at the default --max-serves:\n%s", out)
	}
}

// A node whose corpus was used up in an earlier run (the serve counts
// live in its store) says so at start, instead of looking healthy and
// ending every session inconclusive.
func TestNodeWarnsCorpusUsedUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	usedUpCorpusStore(t, path)
	run := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, errOut, code := peersMain(t, ctx, "node", "--challenges", "examples", "--store", path, "--key", filepath.Join(dir, "key"),
			"--listen", "/ip4/127.0.0.1/tcp/0")
		if code != exitOK {
			t.Fatalf("node exit %d: %s", code, errOut)
		}
		return errOut
	}
	if out := run(); !strings.Contains(out, "every set of the challenge corpus has been served") {
		t.Fatalf("no warning for a used-up corpus:\n%s", out)
	}
	// With room again (--max-serves 2), no warning.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, errOut, _ := peersMain(t, ctx, "node", "--challenges", "examples", "--max-serves", "2", "--store", path, "--key", filepath.Join(dir, "key"),
		"--listen", "/ip4/127.0.0.1/tcp/0")
	if strings.Contains(errOut, "every set of the challenge corpus has been served") {
		t.Fatalf("warned with sets left:\n%s", errOut)
	}
}

// A node with an LLM pool says its first sets are being written (a peer
// that comes first gets an inconclusive session), then when the first
// is ready.
func TestNodeAnnouncesFirstSet(t *testing.T) {
	srv := genStubOf(t, 3, true)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"node", "--llm", "openai:stub", "--llm-base-url", srv.URL + "/v1", "--challenges", "llm", "--pool-size", "1",
			"--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0"}, out, io.Discard)
	}()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), "first challenge set ready after") {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no announcement of the first set:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("node exit %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "the pool is writing its first challenge sets") {
		t.Fatalf("no word of the pool filling:\n%s", out.String())
	}
}

// With --json the node says the same in JSON: its first line has
// first_set_ready false, and a later line first_set_ready true. Before, a
// program reading a --json node had no way to tell when it verifies.
func TestNodeAnnouncesFirstSetJSON(t *testing.T) {
	srv := genStubOf(t, 3, true)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"node", "--json", "--llm", "openai:stub", "--llm-base-url", srv.URL + "/v1", "--challenges", "llm", "--pool-size", "1",
			"--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0"}, out, io.Discard)
	}()
	deadline := time.Now().Add(90 * time.Second)
	for strings.Count(out.String(), "\n") < 2 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no announcement of the first set:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("node exit %d:\n%s", code, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first["first_set_ready"] != false || first["peer_id"] == nil {
		t.Fatalf("first line %q: %v", lines[0], err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil || second["first_set_ready"] != true {
		t.Fatalf("second line %q: %v", lines[1], err)
	}
}

// --node takes host:port, the metrics URL or the peers URL itself.
func TestPeersURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9464":                      "http://127.0.0.1:9464/peers",
		"http://127.0.0.1:9464/metrics":       "http://127.0.0.1:9464/peers",
		"http://127.0.0.1:9464/peers":         "http://127.0.0.1:9464/peers",
		"https://node.example:443/ops/peers/": "https://node.example:443/ops/peers",
	} {
		if got, err := peersURL(in); err != nil || got != want {
			t.Errorf("peersURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// --http and --metrics on one port is a usage error before the node
// starts (the second listener failed with "address already in use").
func TestHTTPAndMetricsSamePort(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runMain(t, "node", "--http", "127.0.0.1:18555", "--metrics", "127.0.0.1:18555",
		"--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0")
	if code != exitUsage || !strings.Contains(errOut, "same port") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, c := range [][2]string{{"127.0.0.1:8080", "127.0.0.1:9464"}, {"127.0.0.1:0", "127.0.0.1:0"}, {"127.0.0.1:8080", "127.0.0.2:8080"}} {
		if err := checkDistinctPorts(c[0], c[1]); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
	if err := checkDistinctPorts(":8080", "127.0.0.1:8080"); err == nil {
		t.Error("the unspecified host overlaps every host")
	}
}

// peers --node says in text, not only in --json (challenges_exhausted),
// that the node ran out of challenge sets.
func TestPrintPeersSaysSourceExhausted(t *testing.T) {
	var out bytes.Buffer
	rep := &peersReport{Self: "self", Source: "node", Stats: &peer.Stats{ChallengesExhausted: 2}}
	printPeers(&out, rep, time.Now(), "")
	if !strings.Contains(out.String(), "challenge source exhausted: 2 session(s)") {
		t.Fatalf("peers --node output:\n%s", out.String())
	}
	out.Reset()
	rep.Stats.ChallengesExhausted = 0
	printPeers(&out, rep, time.Now(), "")
	if strings.Contains(out.String(), "exhausted") {
		t.Fatalf("peers --node output with sets left:\n%s", out.String())
	}
}

// attest (or a second node) on a store a running node holds says so once
// and what to do: before, "(a running node?)" came twice in one line.
func TestLockedStoreErrorSaysItOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, errOut, code := runMain(t, "attest", "--store", path, "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0",
		"/ip4/127.0.0.1/tcp/9/p2p/12D3KooWGPwVBZLHKBYMqMotLPBtncFBe4jjAyAV5tSBg9vF4WSJ")
	if code != exitFailure || strings.Count(errOut, "a running node?") != 1 || !strings.Contains(errOut, "its own --store and --key") {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
}

// A node without --llm names the source auto picked in its start-up
// lines: before, it said "challenges: auto".
func TestNodeNamesResolvedChallengeSource(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"node", "--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"), "--listen", "/ip4/127.0.0.1/tcp/0"}, out, io.Discard)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "attest with:") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(out.String(), "challenges: procedural") || strings.Contains(out.String(), "challenges: auto") {
		t.Fatalf("start-up lines:\n%s", out.String())
	}
}

// attestations list, show and export on a store a running node holds say
// what fits them: stop the node (show and export need the store itself);
// list may point to peers --node for the verdicts behind each peer.
// Before, all three said "or, for its peers, ... run acaptcha peers
// --node ADDR", a way to peers, not to a record.
func TestAttestationsOnLockedStoreHint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, args := range [][]string{{"attestations", "list"}, {"attestations", "show", "0123456789abcdef"}, {"attestations", "export", "0123456789abcdef", "-o", filepath.Join(dir, "x.att")}} {
		_, errOut, code := newUserMain(context.Background(), append(args, "--store", path)...)
		if code != exitFailure || !strings.Contains(errOut, "locked") || !strings.Contains(errOut, "stop the node first") {
			t.Fatalf("%v on a held store: exit %d, stderr %q", args, code, errOut)
		}
		if peersHint := strings.Contains(errOut, "peers --node"); peersHint != (args[1] == "list") || strings.Contains(errOut, "for its peers") {
			t.Errorf("%v on a held store: %q", args, errOut)
		}
	}
}

// A flag that takes a peer ID says, when it does not hold one, what a
// peer ID looks like; before, the decoder's "failed to parse peer ID:
// invalid cid: invalid cid: expected 1 as the cid version number, got:
// 113" was the whole message.
func TestPeerIDFlagsSayWhatAPeerIDIs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	att := filepath.Join(dir, "x.att")
	if err := os.WriteFile(att, []byte("00"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"peers", "--store", path, "--peer", "bogus"},
		{"attestations", "list", "--store", path, "--peer", "bogus"},
		{"attestations", "verify", att, "--subject", "bogus"},
		{"attestations", "verify", att, "--issuer", "bogus"},
	} {
		_, errOut, code := newUserMain(context.Background(), args...)
		if code != exitUsage || !strings.Contains(errOut, `"bogus" is not a peer ID (want one as acaptcha prints them, 12D3KooW`) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// peers --node given a node's libp2p port (not its --metrics address)
// printed Go's raw `malformed HTTP response "\x13/multistream/1.0.0"`; it
// says which port it reached.
func TestPeersNodeLibp2pPortHint(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	port, err := h.Addrs()[0].ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := peersMain(t, context.Background(), "peers", "--node", "127.0.0.1:"+port)
	if code != exitNetwork || !strings.Contains(errOut, "libp2p port, not its --metrics address") {
		t.Fatalf("exit %d, want %d naming the libp2p port:\n%s", code, exitNetwork, errOut)
	}
}

// attest with a corpus every set of which was served --max-serves times
// warned, dialed the peer anyway and ended INCONCLUSIVE; it now says so
// before dialing (exit 1), with no network traffic.
func TestAttestCorpusUsedUpFailsFast(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	usedUpCorpusStore(t, path)
	_, id := testKey(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The address is not listened on: a dial would fail with exit 3.
	_, errOut, code := peersMain(t, ctx, "attest", "--challenges", "examples", "--store", path, "--key", filepath.Join(dir, "key"),
		"--listen", "/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/"+strings.TrimPrefix(freeAddr(t), "127.0.0.1:")+"/p2p/"+id.String())
	if code != exitFailure || !strings.Contains(errOut, "nothing to verify the peer with") {
		t.Fatalf("exit %d, want %d before dialing:\n%s", code, exitFailure, errOut)
	}
}

// usedUpCorpusStore makes a store at path whose ledger says every example
// set was served once (--max-serves 1 leaves none).
func usedUpCorpusStore(t *testing.T, path string) {
	t.Helper()
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		if ok, err := st.TryServe(s.ID, 1); !ok || err != nil {
			t.Fatalf("serve %s: %v %v", s.ID, ok, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
