package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/httpgw"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/pool"
)

// contactOptions are the first-contact and discovery flags of the node
// command.
type contactOptions struct {
	attestPolicy  string
	retryRejected time.Duration
	keepExpired   time.Duration
	consensus     int
	bootstrap     []string
	mdns          bool
	dht           bool
	publicOnly    bool
	limits        limitOptions
}

// limitOptions are the abuse limits of the node command (issue 10;
// spec/protocol.md §5a, §9a).
type limitOptions struct {
	connLow, connHigh, connsPerIP int
	newConnsPerSecond             int
	limitLoopback                 loopbackMode
	verifyFirst                   loopbackMode // auto|on|off, as --limit-loopback's
	powDifficulty                 int
	payDifficulty                 int
	drawsPerPeer, drawsPerPrefix  int
	drawsPerBlock                 int
	sessionsPerVerifierBlock      int
	draws                         int
	sessionsPerVerifier           int
	callsPerVerifier              int
	tokensPerVerifier             int
	proverCalls                   int
	sessionsPerVerifierPrefix     int
	proverSessions, proverTokens  int
	proverPowWork                 int
	verifierPayWork               int
	maxAcceptTotal                time.Duration
}

// check validates the limits, naming the flag at fault.
func (l *limitOptions) check() error {
	for _, c := range []struct {
		flag string
		v    int
	}{
		{"--conn-low", l.connLow}, {"--conn-high", l.connHigh}, {"--conns-per-ip", l.connsPerIP},
		{"--new-conns-per-second", l.newConnsPerSecond},
		{"--max-draws-per-peer", l.drawsPerPeer}, {"--max-draws-per-prefix", l.drawsPerPrefix}, {"--max-draws", l.draws},
		{"--max-sessions-per-verifier", l.sessionsPerVerifier}, {"--max-calls-per-verifier", l.callsPerVerifier},
		{"--max-tokens-per-verifier", l.tokensPerVerifier}, {"--max-prover-calls", l.proverCalls},
		{"--max-sessions-per-verifier-prefix", l.sessionsPerVerifierPrefix}, {"--max-prover-sessions", l.proverSessions},
		{"--max-prover-tokens", l.proverTokens}, {"--max-prover-pow-work", l.proverPowWork},
		{"--max-verifier-pay-work", l.verifierPayWork},
		{"--max-draws-per-block", l.drawsPerBlock}, {"--max-sessions-per-verifier-block", l.sessionsPerVerifierBlock},
	} {
		if c.v < 0 {
			return usageErr("%s %d: must not be negative (0: the default)", c.flag, c.v)
		}
	}
	switch {
	case l.connLow > 0 && l.connHigh > 0 && l.connHigh < l.connLow:
		return usageErr("--conn-high %d is below --conn-low %d", l.connHigh, l.connLow)
	case l.connHigh > 1<<20:
		return usageErr("--conn-high %d: at most %d", l.connHigh, 1<<20)
	case l.powDifficulty < powAuto || l.powDifficulty > protocol.DefaultMaxPowDifficulty:
		return usageErr("--pow-difficulty %d: want 0 (none) to %d bits, or auto (%d when listening beyond loopback or with a --relay, else 0)", l.powDifficulty, protocol.DefaultMaxPowDifficulty, protocol.PublicPowDifficulty)
	case l.payDifficulty < powAuto || l.payDifficulty > protocol.DefaultMaxPowDifficulty:
		return usageErr("--pay-difficulty %d: want 0 (none) to %d bits, or auto (%d when listening beyond loopback or with a --relay, else 0)", l.payDifficulty, protocol.DefaultMaxPowDifficulty, protocol.PublicPowDifficulty)
	case l.maxAcceptTotal < 0 || l.maxAcceptTotal > protocol.MaxTotal:
		return usageErr("--max-accept-total %s: want 0 (default) up to %s", l.maxAcceptTotal, protocol.MaxTotal)
	case l.drawsPerPeer > 0 && l.draws > 0 && l.drawsPerPeer > l.draws:
		return usageErr("--max-draws-per-peer %d exceeds --max-draws %d", l.drawsPerPeer, l.draws)
	}
	return nil
}

// apply copies the limits into a node config.
func (l *limitOptions) apply(cfg *peer.Config) {
	cfg.ConnLowWater, cfg.ConnHighWater, cfg.ConnsPerIP = l.connLow, l.connHigh, l.connsPerIP
	cfg.NewConnsPerSecond = l.newConnsPerSecond
	// Looked up once: a DNS listen address is resolved to decide.
	reach := peer.ReachableBeyondLoopback(cfg.ListenAddrs, cfg.Relays)
	cfg.LimitLoopback = l.limitLoopback.limits(reach)
	cfg.VerifyFirst = l.verifyFirst.limits(reach)
	cfg.ExemptLoopback = !cfg.LimitLoopback
	cfg.AnswerFirst = !cfg.VerifyFirst
	// Every value explicit: the library reads 0 as auto, the flags as none.
	pow := l.powDifficulty
	if pow == powAuto {
		pow = autoPow(reach)
	}
	if pow == 0 {
		pow = protocol.NoPow
	}
	pay := l.payDifficulty
	if pay == powAuto {
		pay = autoPow(reach)
	}
	if pay == 0 {
		pay = peer.NoPay
	}
	cfg.Limits = peer.Limits{
		PowDifficulty:   pow,
		PayDifficulty:   pay,
		MaxDrawsPerPeer: l.drawsPerPeer, MaxDrawsPerPrefix: l.drawsPerPrefix, MaxDraws: l.draws,
		MaxDrawsPerBlock: l.drawsPerBlock, MaxSessionsPerVerifierBlock: l.sessionsPerVerifierBlock,
		MaxSessionsPerVerifier: l.sessionsPerVerifier, MaxCallsPerVerifier: l.callsPerVerifier,
		MaxSessionsPerVerifierPrefix: l.sessionsPerVerifierPrefix, MaxProverSessions: l.proverSessions,
		MaxProverTokens: l.proverTokens, MaxProverPowWork: l.proverPowWork, MaxVerifierPayWork: l.verifierPayWork,
		MaxTokensPerVerifier: l.tokensPerVerifier, MaxProverCalls: l.proverCalls,
	}
	if l.maxAcceptTotal > 0 {
		// A node accepts at least its own policy's total.
		cfg.Limits.MaxAcceptTotal = max(l.maxAcceptTotal, cfg.Policy.Total)
	}
}

// loopbackMode is --limit-loopback: loopbackAuto (the zero value), on or
// off.
type loopbackMode string

const (
	loopbackAuto = "auto"
	loopbackOn   = "on"
	loopbackOff  = "off"
)

func (m *loopbackMode) Set(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case loopbackAuto:
		*m = loopbackAuto
	case loopbackOn, "true", "1":
		*m = loopbackOn
	case loopbackOff, "false", "0":
		*m = loopbackOff
	default:
		return fmt.Errorf("%q: want auto, on or off", v)
	}
	return nil
}

func (m *loopbackMode) String() string {
	if *m == "" {
		return loopbackAuto
	}
	return string(*m)
}

func (m *loopbackMode) Type() string { return "auto|on|off" }

// limits reports whether loopback peers of a node count in the per-IP and
// per-prefix limits: auto limits them when the node is reachable beyond
// loopback (reach, autoPow's rule). Loopback was exempt
// whatever the node listened on, so behind a local proxy, an SSH or Tor
// tunnel or a service mesh's sidecar (every peer it forwards arrives from
// 127.0.0.1) fresh peer IDs had the node's whole budgets: no per-prefix
// draw, session or inbound limit, no per-IP connection limit.
func (m loopbackMode) limits(reach bool) bool {
	switch m {
	case loopbackOn:
		return true
	case loopbackOff:
		return false
	}
	return reach
}

// powAuto as --pow-difficulty (the default) picks the base proof of work
// from the listen addresses (autoPow).
const powAuto = -1

// powFlag is --pow-difficulty: bits, or auto (powAuto; -1 is read as
// auto too, as --help said before it took the word).
type powFlag struct{ p *int }

func (f *powFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "auto") {
		*f.p = powAuto
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q: want auto or a number of bits", v)
	}
	*f.p = n
	return nil
}

func (f *powFlag) String() string {
	if f.p == nil || *f.p == powAuto {
		return "auto"
	}
	return strconv.Itoa(*f.p)
}

func (f *powFlag) Type() string { return "auto|bits" }

// drainWait bounds how long a stopping node waits for its running
// sessions to finish, libp2p and HTTP door alike (peer.Node.Drain,
// httpgw.Gateway.Drain).
const drainWait = 30 * time.Second

// checkLLMAtStart starts the guard's first canary in the background (a
// long-running node or mcp server: a dead LLM is reported, and hellos
// declined, before the first session fails). attest checks synchronously
// instead (one canary, not two).
func (a *app) checkLLMAtStart() {
	if a.guard != nil {
		a.guard.CheckAsync()
	}
}

// llmReplied tells the LLM errors that came with a reply of the provider
// (a rate limit, an empty or truncated output): the model is reachable,
// so they do not mark it down (skill.GuardedProver).
func llmReplied(err error) bool {
	return errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrEmptyOutput) || errors.Is(err, llm.ErrTruncated)
}

// flagGiven reports whether the user set flag name of cmd, on the
// command line or through its ACAPTCHA_ variable (bindEnv sets values
// without marking them changed).
func flagGiven(cmd *cobra.Command, name string) bool {
	fl := cmd.Flags().Lookup(name)
	if fl == nil {
		return false
	}
	if fl.Changed {
		return true
	}
	_, ok := os.LookupEnv(flagEnv(fl))
	return ok
}

// setTokens is the generation cost of one accepted challenge set in
// tokens, its share of rejected attempts included (pool.DefaultTokenBudget
// has the measurement): what a draw of an LLM-written set costs the node.
const setTokens = 16_600

// capDraws lowers the default global draw budget to the sets the node's
// challenge generation can make in an hour (spec/protocol.md §9a): with
// an LLM pool (--challenges llm or hybrid) and a token budget B, at most
// ⌊B / setTokens⌋ · --max-serves + --pool-size. A draw budget above what
// the source supplies prices nothing: fresh peer IDs paying the base
// proof of work would empty the pool and spend the hour's generation
// while the surcharge G (a function of the draws left) stayed at zero.
// Capped, G rises as they spend it and the kept quarter (for peers the
// node admits) is a quarter of the real supply. The per-peer and
// per-prefix defaults are lowered to the cap when above it.
func (a *app) capDraws(l *peer.Limits, given func(flag string) bool) {
	switch challengeKind(a.challenges) {
	case skill.SourceLLM, skill.SourceHybrid:
	default:
		return
	}
	if a.gen.tokenBudget <= 0 {
		return
	}
	supply := a.gen.tokenBudget/setTokens*max(a.maxServes, 1) + a.gen.poolSize
	draws := l.MaxDraws
	if draws == 0 {
		draws = protocol.DefaultMaxDraws
	}
	if supply >= draws {
		return
	}
	l.MaxDraws = max(supply, 1)
	isGiven := func(flag string) bool { return given != nil && given(flag) }
	for _, f := range []struct {
		v    *int
		flag string
	}{{&l.MaxDrawsPerPeer, "max-draws-per-peer"}, {&l.MaxDrawsPerPrefix, "max-draws-per-prefix"}} {
		if *f.v == 0 || *f.v > l.MaxDraws {
			if *f.v != 0 && isGiven(f.flag) {
				a.log.Warn("--"+f.flag+" is above the global draw budget that challenge generation supplies: lowered to it (give --max-draws to keep both)",
					"given", *f.v, "max_draws", l.MaxDraws)
			}
			*f.v = l.MaxDraws
		}
	}
	// One network takes at most an eighth of so small a supply, as on
	// the prover side (spec §9a), unless the operator said otherwise:
	// fresh IDs of one /24 would otherwise spend all that is not kept for
	// admitted peers.
	if !isGiven("max-draws-per-prefix") {
		l.MaxDrawsPerPrefix = min(l.MaxDrawsPerPrefix, max(l.MaxDraws/8, 1))
		if isGiven("max-draws-per-peer") {
			// A per-peer budget given alone is not undone by the
			// prefix's default (its peer is in some prefix).
			l.MaxDrawsPerPrefix = max(l.MaxDrawsPerPrefix, l.MaxDrawsPerPeer)
		} else {
			l.MaxDrawsPerPeer = min(l.MaxDrawsPerPeer, l.MaxDrawsPerPrefix)
		}
	}
	a.log.Info("global draw budget set to what challenge generation supplies",
		"max_draws", l.MaxDraws, "pool_token_budget", a.gen.tokenBudget, "set_tokens", setTokens)
}

// autoPow is the base proof of work of a node that reach says is
// reachable beyond loopback (peer.ReachableBeyondLoopback of its listen
// addresses, the defaults when none, and its --relay): when any listen
// address is an IP address other than loopback (an unspecified one covers
// every interface), or it has a relay (peers from anywhere reach it
// through the relay), protocol.PublicPowDifficulty, so that a peer from
// the network pays before this node draws a set for it; none for a node
// only loopback can reach.
func autoPow(reach bool) int {
	if reach {
		return protocol.PublicPowDifficulty
	}
	return 0
}

// startNode builds a node from the global options. contact enables first
// contact and discovery; nil (a one-shot command) leaves both off.
func (a *app) startNode(cmd *cobra.Command, listen []string, contact *contactOptions) (*peer.Node, string, error) {
	if contact == nil {
		contact = &contactOptions{attestPolicy: string(peer.AttestNone), keepExpired: peer.DefaultKeepExpired}
	}
	ctx := cmd.Context()
	pol, err := a.policy()
	if err != nil {
		return nil, "", err
	}
	if a.trustQuorum < 0 || a.blockRejected < 0 {
		return nil, "", usageErr("--trust-quorum and --block-rejected must not be negative")
	}
	requireSource, err := peer.ParseRequireSource(a.requireSource)
	if err != nil {
		return nil, "", usageErr("--require-source: %v", err)
	}
	attestPolicy, err := peer.ParseAttestPolicy(contact.attestPolicy)
	if err != nil {
		return nil, "", usageErr("--attest-policy: %v", err)
	}
	// (A one-shot command has no such flag: its contact options leave
	// the back-off 0, unused.)
	if r := contact.retryRejected; r < 0 || r > peer.MaxRetryRejected || (r == 0 && flagGiven(cmd, "retry-rejected")) {
		// The back-off doubles per rejection up to peer.MaxRetryRejected:
		// a longer first back-off was cut to it for the doubling and kept
		// whole for the stored rejection a restart backs off from, and 0
		// quietly meant the 1h default.
		return nil, "", usageErr("--retry-rejected %s: want a positive duration, at most %s (the back-off doubles per rejection up to that)", contact.retryRejected, peer.MaxRetryRejected)
	}
	if contact.publicOnly && contact.mdns {
		// mDNS finds peers on the local network only, whose addresses
		// --dial-public-only refuses: it is off unless asked for.
		if fl := cmd.Flags().Lookup("mdns"); fl != nil && fl.Changed {
			return nil, "", usageErr("--mdns finds peers on the local network, which --dial-public-only never dials: drop one of them")
		}
		contact.mdns = false
	}
	keepExpired := contact.keepExpired
	switch {
	case keepExpired < 0:
		return nil, "", usageErr("--keep-expired must not be negative (0 keeps expired attestations forever)")
	case keepExpired == 0:
		keepExpired = -1 // peer.Config: negative is never
	}
	if _, err := peer.ParseBootstrap(contact.bootstrap); err != nil {
		return nil, "", usageErr("--bootstrap: %v", err)
	}
	if err := contact.limits.check(); err != nil {
		return nil, "", err
	}
	if err := a.nat.check(); err != nil {
		return nil, "", err
	}
	if err := a.checkSourcePolicy(pol); err != nil {
		return nil, "", err
	}
	if a.metricsAddr != "" {
		if err := checkHostPort("--metrics", a.metricsAddr, "127.0.0.1:9464"); err != nil {
			return nil, "", err
		}
	}
	for _, l := range listen {
		if err := checkListenAddr(l); err != nil {
			return nil, "", err
		}
	}
	// The identity first: a key file that cannot be read leaves no
	// empty store behind.
	key, err := peer.LoadOrCreateKey(a.keyFile, a.log)
	if err != nil {
		return nil, "", err
	}
	if err := checkNotSelf(key, a.keyFile, contact.bootstrap, a.nat.relays); err != nil {
		return nil, "", err
	}
	store, err := peer.OpenStore(a.storePath)
	if err != nil {
		return nil, "", storeOpenErr(a.storePath, err, "stop it, or give this command its own --store and --key")
	}
	src, err := a.source(store, a.maxServes)
	if err != nil {
		store.Close()
		return nil, "", err
	}
	if a.maxServes > 1 {
		// A session ends at its first wrong answer and its verdict names
		// that round, so a set served again tells a script which of its
		// earlier answers were right: one that keeps them across sessions
		// (fresh peer IDs) learns the set (verification.md, "What the
		// verdict says about scripts").
		a.log.Warn("--max-serves above 1: a challenge set served more than once can be learned by a script across sessions (each verdict names the round that failed), so the source's figures against scripts hold only for sets served once",
			"max_serves", a.maxServes, "source", src.Name())
	}
	prover, llmName, err := a.prover(ctx)
	if err != nil {
		store.Close()
		return nil, "", err
	}
	if a.agentProver != nil { // acaptcha mcp: the MCP client answers (mcp.go)
		prover, llmName = a.agentProver, "mcp-client"
	} else if prover != nil {
		// An LLM behind a network can be unreachable: the guard checks it
		// after a failed answer (and node and mcp at start, attest before
		// it dials: checkLLMAtStart), and while it is down the node
		// declines to be verified instead of being signed declined.
		a.guard = skill.NewGuardedProver(prover, a.log, llmReplied)
		prover = a.guard
	}
	var reg *prometheus.Registry
	if a.metricsAddr != "" {
		reg = newMetricsRegistry()
	}
	// Consensus feedback (probabilistic-CAPTCHA seed): a question that
	// several provers who passed their earlier rounds answer the same
	// wrong way is retired from serving.
	served := src
	var feedback *skill.Consensus
	if contact.consensus < 0 || contact.consensus == 1 {
		store.Close()
		return nil, "", usageErr("--consensus %d: want 0 (off) or at least 2", contact.consensus)
	}
	if contact.consensus > 0 {
		feedback, err = skill.NewConsensus(skill.ConsensusConfig{Threshold: contact.consensus})
		if err != nil {
			store.Close()
			return nil, "", usageErr("--consensus: %v", err)
		}
		served = skill.RetiringSource{Source: src, Consensus: feedback}
		if reg != nil {
			registerConsensusMetrics(reg, feedback)
		}
	}
	cfg := peer.Config{
		Key:         key,
		Store:       store,
		ListenAddrs: listen,
		Policy:      pol,
		Source:      served,
		Feedback:    feedback,
		Prover:      prover,
		Logger:      a.log,

		TrustQuorum:   a.trustQuorum,
		RequireSource: requireSource,
		SourceKind:    challengeKind(a.challenges),
		Gossip:        a.gossip,
		BlockRejected: a.blockRejected,

		AttestPolicy:   attestPolicy,
		RetryRejected:  contact.retryRejected,
		KeepExpired:    keepExpired,
		Bootstrap:      contact.bootstrap,
		MDNS:           contact.mdns,
		DHT:            contact.dht,
		DialPublicOnly: contact.publicOnly,
	}
	a.nat.apply(&cfg) // nat.go: --nat, --relay, --relay-service; before the limits, which read the relays
	contact.limits.apply(&cfg)
	// node has --max-draws; attest and mcp do not, and take the cap. A
	// value from the environment (ACAPTCHA_MAX_DRAWS, ...) is given too.
	given := func(name string) bool { return flagGiven(cmd, name) }
	if !given("max-draws") {
		a.capDraws(&cfg.Limits, given)
	}
	if reg != nil {
		cfg.Metrics = reg
	}
	n, err := peer.New(cfg)
	if err != nil {
		store.Close()
		// The flags were checked above: what fails here is the
		// environment (a port another process holds, an unreadable key
		// file, a transport that would not start).
		return nil, "", fmt.Errorf("start node: %w", err)
	}
	if pool, ok := src.(interface{ Ready() int }); ok {
		n.SetPoolDepth(pool.Ready)
		a.gen.ready = pool.Ready
	}
	if p, ok := src.(interface{ Stats() pool.Stats }); ok {
		a.gen.stats = p.Stats
	}
	if pool, ok := src.(interface{ ConsecutiveFailures() int }); ok {
		n.SetPoolFailures(pool.ConsecutiveFailures)
	}
	if reg != nil {
		if err := a.serveOps(ctx, a.metricsAddr, reg, n); err != nil {
			n.Close()
			store.Close()
			return nil, "", fmt.Errorf("--metrics: %w", err)
		}
	}
	return n, llmName, nil
}

// closeNode closes a started node, then stops the command's generation
// pools (they draw on nothing once the node is closed; a set that one
// finishes is saved to the store), then closes the store the node and
// the pools share. Stopped after the store, a pool whose set was ready in
// between failed to save it ("database not open"), an LLM generation
// spent for nothing.
func (a *app) closeNode(n *peer.Node) {
	n.Close()
	if a.gen.stopPools != nil {
		a.gen.stopPools() // idempotent: Main and node's defer call it too
	}
	n.Store().Close()
}

func (a *app) nodeCmd() *cobra.Command {
	var httpAddr string
	var httpProxies []string
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a node: verify peers that contact it and answer their challenges with the configured LLM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			proxies, err := parseTrustedProxies(httpProxies, httpAddr) // http.go
			if err != nil {
				return err
			}
			if err := checkHTTPAddr(httpAddr); err != nil {
				return err
			}
			if err := checkDistinctPorts(httpAddr, a.metricsAddr); err != nil {
				return err
			}
			if a.gen.stopPools != nil {
				// After the node's drain and close (deferred below, so
				// this runs last).
				defer a.gen.stopPools()
			}
			n, llmName, err := a.startNode(cmd, a.listen, &a.contact)
			if err != nil {
				return err
			}
			a.checkLLMAtStart()
			defer func() {
				a.closeNode(n)
			}()
			// The announcement of the pool's first set ends with the
			// command (before it returns: it writes to stdout), and
			// writes through a lock the command's own lines share.
			a.stdout = &lockedWriter{w: a.stdout}
			var announce sync.WaitGroup
			actx, stopAnnounce := context.WithCancel(cmd.Context())
			defer func() { stopAnnounce(); announce.Wait() }()
			httpURL, httpAll, httpPow, drainHTTP, stopHTTP, err := a.startHTTPDoor(n, httpAddr, proxies)
			if err != nil {
				return err
			}
			defer stopHTTP() // runs before the node closes
			addrs := n.Addrs()
			if a.jsonOut {
				out := map[string]any{"peer_id": n.ID().String(), "llm": llmName, "challenges": a.challenges,
					"challenge_source": challengeKind(a.challenges), "require_source": n.RequireSource(),
					"pow_difficulty": max(n.ProtocolConfig().PowDifficulty, 0), "pay_difficulty": n.ProtocolConfig().PayDifficulty, "verify_first": n.ProtocolConfig().VerifyFirst}
				var as []string
				for _, m := range addrs {
					as = append(as, m.String())
				}
				out["addrs"] = as
				if httpURL != "" {
					out["http"] = httpURL
					if httpAll {
						out["http_all_interfaces"] = true
					}
					out["http_pow_difficulty"] = max(n.ProtocolConfig().PowDifficulty, httpPow)
				}
				if a.metricsURL != "" {
					out["metrics"] = a.metricsURL
					if a.metricsAll {
						out["metrics_all_interfaces"] = true
					}
				}
				if a.nat.relayService {
					out["relay_service"] = true
				}
				if len(a.nat.relays) > 0 {
					out["relays"] = a.nat.relays
				}
				pending := a.gen.ready != nil && a.gen.ready() == 0
				if pending {
					// Sessions end inconclusive until the pool's first
					// set: a second line says when it is there.
					out["first_set_ready"] = false
				}
				b, _ := json.Marshal(out)
				fmt.Fprintln(a.stdout, string(b))
				if pending {
					announce.Go(func() { a.announceFirstSet(actx, time.Now()) })
				}
			} else {
				fmt.Fprintf(a.stdout, "acaptcha node %s\n", n.ID())
				for _, m := range addrs {
					fmt.Fprintf(a.stdout, "  listening on %s\n", m)
				}
				if llmName != "" {
					fmt.Fprintf(a.stdout, "  answering challenges with %s\n", llmName)
				} else {
					fmt.Fprintf(a.stdout, "  %s\n", noLLMHint)
				}
				shown := a.challenges
				if shown == "auto" { // no --llm: what auto resolved to
					shown = "procedural (--challenges auto without --llm)"
				}
				fmt.Fprintf(a.stdout, "  challenges: %s (attestations carry source %s); store: %s\n", shown, protocol.SourceName(challengeKind(a.challenges)), a.storePath)
				if a.gen.ready != nil && a.gen.ready() == 0 {
					// An LLM takes tens of seconds per set: a peer that
					// comes first gets an inconclusive session.
					fmt.Fprintln(a.stdout, "  the pool is writing its first challenge sets: until one is ready (a line says so), the sessions this node runs end inconclusive")
					announce.Go(func() { a.announceFirstSet(actx, time.Now()) })
				}
				fmt.Fprintf(a.stdout, "  admits and vouches on attestations whose challenges rank at least %s (--require-source)\n", n.RequireSource())
				d := max(n.ProtocolConfig().PowDifficulty, 0)
				if d > 0 {
					fmt.Fprintf(a.stdout, "  a libp2p peer pays %d bits of proof of work before this node draws a set for it (--pow-difficulty; failures and load add to it)\n", d)
				} else {
					fmt.Fprintln(a.stdout, "  no proof of work asked of libp2p peers on an idle node (--pow-difficulty; failures and load add to it)")
				}
				if n.ProtocolConfig().VerifyFirst {
					fmt.Fprintln(a.stdout, "  a verifier that contacts this node is answered once this node admits it: it is verified first (--verify-first)")
				}
				if d := n.ProtocolConfig().PayDifficulty; d > 0 {
					fmt.Fprintf(a.stdout, "  a verifier that contacts this node and is not admitted pays %d bits of proof of work before this node's LLM answers it (--pay-difficulty)\n", d)
				} else {
					fmt.Fprintln(a.stdout, "  no proof of work asked of verifiers before this node's LLM answers them (--pay-difficulty)")
				}
				for _, l := range a.nat.startLines() {
					fmt.Fprintf(a.stdout, "  %s\n", l)
				}
				fmt.Fprintln(a.stdout, "  attest with: acaptcha attest <one of the addresses above>   (Ctrl-C stops)")
				if a.metricsURL != "" {
					fmt.Fprintf(a.stdout, "  metrics at %s%s, live peers with: acaptcha peers --node %s\n", a.metricsURL, allInterfaces(a.metricsAll), strings.TrimSuffix(strings.TrimPrefix(a.metricsURL, "http://"), "/metrics"))
				}
				if httpURL != "" {
					fmt.Fprintf(a.stdout, "  HTTP door for agents without libp2p: %s%s (manifest %s%s)\n", httpURL, allInterfaces(httpAll), httpURL, httpgw.ManifestPath)
					// The door keeps a floor for anonymous clients, whatever
					// --pow-difficulty says (spec/http.md §8).
					fmt.Fprintf(a.stdout, "  an HTTP client pays at least %d bits of proof of work (the door's floor for anonymous clients, spec/http.md §8; load adds to it)\n", max(d, httpPow))
				}
			}
			<-cmd.Context().Done()
			// A stop lets the sessions that run finish (a prover cut off
			// mid-session is signed protocol_error by its verifier):
			// new ones are refused BUSY, nothing is signed about them. A
			// second signal, or drainWait, stops at once.
			if !a.jsonOut {
				fmt.Fprintf(a.stdout, "stopping: letting running sessions finish (up to %s; Ctrl-C again stops at once)\n", drainWait)
			}
			again := make(chan os.Signal, 1)
			signal.Notify(again, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(again)
			sctx, cancel := context.WithTimeout(context.Background(), drainWait)
			defer cancel()
			go func() {
				select {
				case <-again:
					cancel()
					stopHTTP() // the door first, as below
					n.Close()
				case <-sctx.Done():
				}
			}()
			// The HTTP door's sessions drain alongside the libp2p ones:
			// their clients keep the door to send probes and answers.
			httpDrained := make(chan error, 1)
			go func() { httpDrained <- drainHTTP(sctx) }()
			if err := n.Drain(sctx); err != nil {
				a.log.Warn("stopped before every running session finished", "err", err)
			}
			if err := <-httpDrained; err != nil {
				a.log.Warn("stopped before every running HTTP door session finished", "err", err)
			}
			// The door first, then the node (deferred above).
			stopHTTP()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&a.contact.attestPolicy, "attest-policy", string(peer.AttestAll), "which peers that connect and speak acaptcha this node attests by itself: all, inbound (they dialled us), outbound (we dialled them) or none")
	f.DurationVar(&a.contact.retryRejected, "retry-rejected", peer.DefaultRetryRejected, "how long a rejected peer is left alone before first contact challenges it again: positive, at most 24h (doubling per rejection, up to 24h)")
	f.DurationVar(&a.contact.keepExpired, "keep-expired", peer.DefaultKeepExpired, "how long the store keeps an attestation after it expired; older ones are pruned at start and hourly, a rejection not before 30 days after its issue (0 keeps them forever)")
	f.IntVar(&a.contact.consensus, "consensus", skill.DefaultConsensusThreshold, "retire a question once this many distinct provers that passed their earlier rounds give it the same non-matching answer on time (0 turns consensus feedback off)")
	f.StringArrayVar(&a.contact.bootstrap, "bootstrap", nil, "peer to connect to at start and keep connected, as a multiaddr ending in /p2p/PEER_ID (repeatable)")
	f.BoolVar(&a.contact.mdns, "mdns", true, "discover peers on the local network with mDNS (--mdns=false turns it off)")
	f.StringVar(&httpAddr, "http", "", "also serve the HTTP door on HOST:PORT (e.g. 127.0.0.1:8080): verifier as a service for agents without libp2p, spec/http.md; off, or leaving the flag out, for none (an empty value is refused)")
	f.StringArrayVar(&httpProxies, "http-trusted-proxy", nil, "address or network (e.g. 10.0.0.0/8) of a reverse proxy in front of the HTTP door: requests from it count against the client named in X-Forwarded-For (repeatable; needs --http)")
	f.BoolVar(&a.contact.dht, "dht", false, "join the private acaptcha Kademlia DHT (through the bootstrap peers) and find peers on its rendezvous")
	f.BoolVar(&a.contact.publicOnly, "dial-public-only", false, "dial public addresses only, after DNS resolution, whoever named them (for a node on a public server, with --dht: a record's DNS name can resolve into this node's own network); mDNS and private --bootstrap peers then go unused")
	l := &a.contact.limits
	f.IntVar(&l.connLow, "conn-low", peer.DefaultConnLowWater, "connection manager low watermark: trimming stops at this many connections")
	f.IntVar(&l.connHigh, "conn-high", peer.DefaultConnHighWater, "connection manager high watermark: above it unattested idle peers are trimmed first (the inbound connection limit is set above it)")
	f.IntVar(&l.connsPerIP, "conns-per-ip", peer.DefaultConnsPerIP, "inbound connections per IPv4 address or IPv6 /56")
	f.IntVar(&l.newConnsPerSecond, "new-conns-per-second", peer.DefaultNewConnsPerSecond, "new connections per second, inbound and outbound, node-wide (a burst of four seconds of it; an eighth per IPv4 /24, a quarter per IPv6 /32), beside libp2p's per-address rates (an IPv4 address or IPv6 /56: one every 5 s after 16); loopback peers, when limited (--limit-loopback), share one bucket of this rate, each --relay address has its own")
	f.Var(&l.limitLoopback, "limit-loopback", "apply the per-IP and per-prefix limits to loopback peers too: auto (the default) when the node listens beyond loopback or has a --relay (a local proxy, tunnel or sidecar makes every peer it forwards a loopback peer), on always, off never (loopback exempt, libp2p's default); --limit-loopback alone is on")
	f.Lookup("limit-loopback").NoOptDefVal = loopbackOn
	f.Var(&l.verifyFirst, "verify-first", "answer a verifier that came to this node only once the node admits it or its own verdict accepted it, verifying it first (spec/protocol.md §5c): auto (the default) when the node listens beyond loopback or has a --relay, on always, off never (such verifiers are answered, paying --pay-difficulty); --verify-first alone is on")
	f.Lookup("verify-first").NoOptDefVal = loopbackOn
	l.powDifficulty = powAuto
	f.Var(&powFlag{&l.powDifficulty}, "pow-difficulty", fmt.Sprintf("base proof of work in bits asked before a challenge set is drawn: auto (or %d) asks %d when listening beyond loopback or with a --relay, else 0; 0 asks none; failures and load add to it", powAuto, protocol.PublicPowDifficulty))
	l.payDifficulty = powAuto
	f.Var(&powFlag{&l.payDifficulty}, "pay-difficulty", fmt.Sprintf("proof of work in bits this node's prover asks of a verifier that contacted it and that it does not admit, before its LLM answers anything: auto (or %d) asks %d when listening beyond loopback or with a --relay, else 0; 0 asks none", powAuto, protocol.PublicPowDifficulty))
	f.IntVar(&l.drawsPerPeer, "max-draws-per-peer", protocol.DefaultMaxDrawsPerPeer, "challenge sets one peer can make this node draw per hour")
	f.IntVar(&l.drawsPerPrefix, "max-draws-per-prefix", protocol.DefaultMaxDrawsPerPrefix, "challenge sets the peers of one IPv4 /24 or IPv6 /48 can make this node draw per hour")
	f.IntVar(&l.drawsPerBlock, "max-draws-per-block", 0, fmt.Sprintf("challenge sets the peers of one IPv6 /32 that this node does not admit can make it draw per hour (0: %d times --max-draws-per-prefix)", protocol.BlockFactor))
	f.IntVar(&l.draws, "max-draws", protocol.DefaultMaxDraws, "challenge sets this node draws per hour for all peers")
	f.IntVar(&l.sessionsPerVerifier, "max-sessions-per-verifier", protocol.DefaultMaxSessionsPerVerifier, "sessions this node answers for one verifier per hour")
	f.IntVar(&l.callsPerVerifier, "max-calls-per-verifier", protocol.DefaultMaxCallsPerVerifier, "LLM calls one verifier can make this node's prover spend per hour")
	f.IntVar(&l.tokensPerVerifier, "max-tokens-per-verifier", protocol.DefaultMaxTokensPerVerifier, "prompt tokens (narrative and question) one verifier can make this node's prover read per hour")
	f.IntVar(&l.sessionsPerVerifierPrefix, "max-sessions-per-verifier-prefix", protocol.DefaultMaxSessionsPerVerifierPrefix, "sessions this node answers per hour for the verifiers of one IPv4 /24 or IPv6 /48 together")
	f.IntVar(&l.sessionsPerVerifierBlock, "max-sessions-per-verifier-block", 0, fmt.Sprintf("sessions this node answers per hour for the verifiers of one IPv6 /32 that it does not admit together (0: %d times --max-sessions-per-verifier-prefix; their proof of work, LLM calls and prompt tokens get %d times a prefix's share)", protocol.BlockFactor, protocol.BlockFactor))
	f.IntVar(&l.proverSessions, "max-prover-sessions", protocol.DefaultMaxProverSessions, "sessions this node answers per hour for all verifiers")
	f.IntVar(&l.proverCalls, "max-prover-calls", protocol.DefaultMaxProverCalls, "LLM calls this node's prover makes per hour for all verifiers")
	f.IntVar(&l.proverTokens, "max-prover-tokens", protocol.DefaultMaxProverTokens, "prompt tokens this node's prover reads per hour for all verifiers")
	f.IntVar(&l.proverPowWork, "max-prover-pow-work", protocol.DefaultMaxProverPowWork, "proof-of-work hashes this node solves as a prover per hour for all verifiers (a session at difficulty D is charged 2^D; the verifiers of one IP prefix get an eighth)")
	f.IntVar(&l.verifierPayWork, "max-verifier-pay-work", protocol.DefaultMaxVerifierPayWork, "proof-of-work hashes this node's verifier solves per hour to pay the provers that ask it (a payment of D bits is charged 2^D; one prover gets a sixteenth, the provers of one IP prefix an eighth; beyond it the session is not run)")
	f.DurationVar(&l.maxAcceptTotal, "max-accept-total", protocol.DefaultMaxAcceptTotal, "longest total_ms this node accepts in a verifier's hello (raised to its own --total if longer)")
	return cmd
}

// announceFirstSet prints when the pool's first set is ready (started
// at start), until ctx ends: a line, or with --json a JSON object.
func (a *app) announceFirstSet(ctx context.Context, start time.Time) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for a.gen.ready() == 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	took := time.Since(start)
	if a.jsonOut {
		b, _ := json.Marshal(map[string]any{"first_set_ready": true, "after_ms": took.Milliseconds()})
		fmt.Fprintln(a.stdout, string(b))
		return
	}
	fmt.Fprintf(a.stdout, "  first challenge set ready after %s: this node verifies peers now\n", took.Round(time.Second))
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// checkListenAddr refuses a --listen address that none of go-libp2p's
// transports listens on (TCP, optionally /ws or /tls/ws; QUIC v1,
// optionally /webtransport; WebRTC direct; a relay's /p2p-circuit):
// go-libp2p fails the start with "no transport for protocol" when it is
// the only one, and drops it with a WARN of its own (filtered at the
// default level) beside another.
func checkListenAddr(l string) error {
	m, err := ma.NewMultiaddr(l)
	if err != nil {
		return usageErr("--listen %q: %v", l, err)
	}
	const want = "want /ip4/HOST/tcp/PORT or /ip4/HOST/udp/PORT/quic-v1 (ip6 and dns alike)"
	for i, c := range m {
		switch c.Protocol().Code {
		case ma.P_TCP, ma.P_CIRCUIT: // /p2p-circuit: the relay transport's
			return nil
		case ma.P_UDP:
			if i+1 < len(m) {
				switch m[i+1].Protocol().Code {
				case ma.P_QUIC_V1, ma.P_WEBRTC_DIRECT:
					return nil
				}
			}
			return usageErr("--listen %q: no libp2p transport listens on a bare UDP port (QUIC is /udp/PORT/quic-v1; draft-29 /quic is gone): %s", l, want)
		}
	}
	return usageErr("--listen %q: names no TCP or UDP port, so no libp2p transport listens on it: %s", l, want)
}

// checkNotSelf refuses a --bootstrap or --relay address that names this
// node's own peer ID (the identity in --key): a usage error naming the
// flag, as attest's own peer ID is, before the store is opened. Before,
// the node failed to start, exit 1, "start node: bootstrap address
// {12D3KooW...: [/ip4/...]} is this node itself".
func checkNotSelf(key crypto.PrivKey, keyFile string, bootstrap, relays []string) error {
	self, err := lpeer.IDFromPrivateKey(key)
	if err != nil {
		return nil // the node's start says what is wrong with the key
	}
	for _, c := range []struct {
		flag  string
		addrs []string
		parse func([]string) ([]lpeer.AddrInfo, error)
	}{{"--bootstrap", bootstrap, peer.ParseBootstrap}, {"--relay", relays, peer.ParseRelays}} {
		for _, s := range c.addrs {
			ais, err := c.parse([]string{s})
			if err != nil {
				continue // refused with its own error before
			}
			for _, ai := range ais {
				if ai.ID == self {
					return usageErr("%s %s names this node's own peer ID (--key %s): give another node's address", c.flag, s, keyFile)
				}
			}
		}
	}
	return nil
}
