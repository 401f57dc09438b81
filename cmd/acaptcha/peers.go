package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// peersReport is the output of `acaptcha peers` and of a node's /peers
// endpoint.
type peersReport struct {
	Self        string `json:"self,omitempty"`
	TrustQuorum int    `json:"trust_quorum"`
	// RequireSource is the challenge-source policy admissions were
	// evaluated with (--require-source).
	RequireSource skill.SourceKind `json:"require_source"`
	Source        string           `json:"source"` // "node" (live) or "store"
	Stats         *peer.Stats      `json:"stats,omitempty"`
	Peers         []peer.PeerInfo  `json:"peers"`
	At            time.Time        `json:"at"`
}

// Limits of the operations endpoint and of its client.
const (
	opsReadHeaderTimeout = 5 * time.Second
	opsReadTimeout       = 10 * time.Second
	opsWriteTimeout      = 30 * time.Second
	opsIdleTimeout       = time.Minute
	opsClientTimeout     = 10 * time.Second
	maxPeersResponse     = 64 << 20
)

func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// registerConsensusMetrics exports the consensus-feedback counters.
func registerConsensusMetrics(reg *prometheus.Registry, c *skill.Consensus) {
	for _, m := range []struct {
		name, help string
		get        func(skill.ConsensusStats) uint64
	}{
		{"acaptcha_consensus_observed_total", "Wrong answers counted by consensus feedback (on time, after a passed round).", func(s skill.ConsensusStats) uint64 { return s.Observed }},
		{"acaptcha_consensus_retired_total", "Questions retired from serving by consensus feedback.", func(s skill.ConsensusStats) uint64 { return s.Retired }},
		{"acaptcha_consensus_disputed_total", "Questions that reached the consensus threshold but were kept as the last of their part.", func(s skill.ConsensusStats) uint64 { return s.Disputed }},
	} {
		get := m.get
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help}, func() float64 { return float64(get(c.Stats())) }))
	}
}

// serveOps serves /metrics (Prometheus) and /peers (the live peer report)
// on addr until ctx ends.
func (a *app) serveOps(ctx context.Context, addr string, reg *prometheus.Registry, n *peer.Node) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	hostport, all := openableHostPort(l.Addr())
	a.metricsURL, a.metricsAll = "http://"+hostport+"/metrics", all
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: opsWriteTimeout / 2}))
	mux.Handle("GET /peers", newPeersEndpoint(func() any {
		st := n.Stats()
		return peersReport{Self: n.ID().String(), TrustQuorum: a.trustQuorum, RequireSource: n.RequireSource(), Source: "node", Stats: &st, Peers: n.Peers(), At: time.Now().UTC()}
	}, a.log))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: opsReadHeaderTimeout,
		ReadTimeout:       opsReadTimeout,
		WriteTimeout:      opsWriteTimeout,
		IdleTimeout:       opsIdleTimeout,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("metrics server", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	a.log.Info("serving metrics", "url", a.metricsURL, "listen", l.Addr().String())
	return nil
}

// opsPeersTTL is how long the operations port serves one rendering of
// /peers: every GET rendered the whole trust index (up to 65,536 learned
// records and their peers, tens of MB of JSON, under the trust lock), as
// many at once as clients asked.
const opsPeersTTL = 2 * time.Second

// newPeersEndpoint serves the report render makes, as JSON: rendered one
// at a time (a GET waits for the rendering under way) and served from
// memory for opsPeersTTL, then forgotten.
func newPeersEndpoint(render func() any, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	var (
		mu   sync.Mutex
		body []byte
		gen  int
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b := body
		if b == nil {
			var err error
			if b, err = json.Marshal(render()); err != nil {
				mu.Unlock()
				log.Error("encode /peers", "err", err)
				http.Error(w, "cannot encode the report", http.StatusInternalServerError)
				return
			}
			b = append(b, '\n')
			body, gen = b, gen+1
			mine := gen
			time.AfterFunc(opsPeersTTL, func() {
				mu.Lock()
				defer mu.Unlock()
				if gen == mine {
					body = nil
				}
			})
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if _, err := w.Write(b); err != nil {
			log.Debug("write /peers", "err", err)
		}
	})
}

func (a *app) peersCmd() *cobra.Command {
	var nodeAddr, only string
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List known peers with their admission state and the attestations behind it",
		Long: `Lists the peers this node knows from its attestations (issued, received and
learned from gossip or presentations), revocations and gate decisions, with
their admission state: admitted directly or through the trust quorum, or the
reason they are not (unattested, rejected, expired, revoked, blocked,
source_below_minimum: accepted only on challenges weaker than --require-source).

Without --node the store is read directly, which needs the node to be
stopped (bbolt allows one process at a time); admissions are then evaluated
with --trust-quorum and --require-source. With --node ADDR the running node started with
--metrics ADDR is asked, and its live view (with gate decisions and blocks)
is shown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep *peersReport
			var err error
			if cmd.Flags().Changed("node") && strings.TrimSpace(nodeAddr) == "" {
				// An unset shell variable (--node "$METRICS") read the
				// store instead of the running node without a word.
				return usageErr("--node is empty: want the running node's --metrics address, host:port or URL (leave the flag out to read a stopped node's store)")
			}
			if nodeAddr != "" && cmd.Flags().Changed("store") {
				return usageErr("--node asks the running node, which reads its own store: drop --store, or drop --node to read a stopped node's store")
			}
			for _, f := range []string{"trust-quorum", "require-source"} {
				if nodeAddr != "" && cmd.Flags().Changed(f) {
					return usageErr("--node shows the running node's admissions, under the --%s it was started with: drop --%s, or drop --node to evaluate a stopped node's store with it", f, f)
				}
			}
			if nodeAddr != "" {
				u, err := peersURL(nodeAddr)
				if err != nil {
					return err
				}
				if rep, err = fetchPeers(cmd.Context(), u, opsClientTimeout); err != nil {
					return err
				}
			} else {
				rep, err = a.storePeers()
				if err != nil {
					return err
				}
			}
			if only != "" {
				id, err := decodePeerFlag("--peer", only)
				if err != nil {
					return err
				}
				var ps []peer.PeerInfo
				for _, p := range rep.Peers {
					if p.Peer == id {
						ps = append(ps, p)
					}
				}
				rep.Peers = ps
			}
			if rep.Peers == nil {
				rep.Peers = []peer.PeerInfo{}
			}
			if a.jsonOut {
				if err := writeJSON(a, rep); err != nil {
					return err
				}
			} else {
				printPeers(a.stdout, rep, time.Now(), only)
			}
			if only != "" && (len(rep.Peers) == 0 || !rep.Peers[0].Admission.Admitted) {
				// A negative answer to "is this peer admitted?", as
				// attestations verify gives one: `peers --peer X && ...`.
				return verdictErr(fmt.Errorf("peer %s is not admitted", only))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&nodeAddr, "node", "", "ask a running node at its --metrics address (host:port or URL) instead of reading the store")
	cmd.Flags().StringVar(&only, "peer", "", "show only this peer ID; exit 1 unless it is admitted")
	return cmd
}

func (a *app) storePeers() (*peersReport, error) {
	if a.trustQuorum < 0 {
		return nil, usageErr("--trust-quorum must not be negative")
	}
	min, err := peer.ParseRequireSource(a.requireSource)
	if err != nil {
		return nil, usageErr("--require-source: %v", err)
	}
	now := time.Now()
	// Do not create a store just to list it: a mistyped --store is an error.
	if err := a.checkStoreExists(); err != nil {
		return nil, err
	}
	st, err := peer.OpenStoreReadOnly(a.storePath)
	if err != nil {
		return nil, storeOpenErr(a.storePath, err, "to list the peers of a running node, start it with --metrics ADDR and run acaptcha peers --node ADDR")
	}
	defer st.Close()
	ps, err := peer.PeerReport(st, a.trustQuorum, min, now)
	if err != nil {
		return nil, fmt.Errorf("read store %s: %w", a.storePath, err)
	}
	rep := &peersReport{TrustQuorum: a.trustQuorum, RequireSource: min, Source: "store", Peers: ps, At: now.UTC()}
	// The newest record of a direction names this node: one record is
	// verified, not all of them (List verified every issued record, one
	// per peer ID a remote made the node verify, to read the first).
	if es, _, err := st.ListNewest(peer.Issued, "", 1); err == nil && len(es) > 0 {
		rep.Self = es[0].Attestation.Issuer.String()
	} else if es, _, err := st.ListNewest(peer.Received, "", 1); err == nil && len(es) > 0 {
		rep.Self = es[0].Attestation.Subject.String()
	} else if id, ok := keyFileID(filepath.Join(filepath.Dir(a.storePath), "key")); ok {
		// A store with no record of its own yet: the key file beside it
		// (the data directory's layout) names the node. Read only; none
		// is made here.
		rep.Self = id.String()
	}
	return rep, nil
}

// peersURL is the /peers URL of a node's --metrics address (host:port or
// URL); a value that is neither is a usage error.
func peersURL(addr string) (string, error) {
	raw := addr
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", usageErr("--node %q: %v", addr, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", usageErr("--node %q: want host:port or an http(s) URL", addr)
	case u.Hostname() == "":
		return "", usageErr("--node %q: no host", addr)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", usageErr("--node %q: port %q", addr, p)
		}
	}
	// The node's metrics or peers URL, or its base: /peers either way.
	base := strings.TrimSuffix(u.Path, "/")
	base = strings.TrimSuffix(strings.TrimSuffix(base, "/metrics"), "/peers")
	u.Path = base + "/peers"
	return u.String(), nil
}

// fetchPeers asks a running node for its peer report at u: a node that
// cannot be reached is a network error (exit 3), a reply that is not a
// peer report a runtime failure (exit 1).
func fetchPeers(ctx context.Context, u string, timeout time.Duration) (*peersReport, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, usageErr("--node: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "multistream") || speaksLibp2p(ctx, req.URL.Host) {
			// The libp2p port answers with multistream-select's header,
			// sometimes before the request is written (Go's client then
			// says only readLoopPeekFailLocked).
			return nil, &exitError{code: exitNetwork, err: fmt.Errorf("ask node at %s: that is the node's libp2p port, not its --metrics address (the node prints that at start: \"metrics at ..., live peers with: acaptcha peers --node ADDR\"): %w", u, err)}
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, &exitError{code: exitNetwork, err: fmt.Errorf("ask node at %s: no answer within %s (is it the node's --metrics address?): %w", u, timeout, err)}
		}
		return nil, &exitError{code: exitNetwork, err: fmt.Errorf("ask node at %s: %w", u, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ask node at %s: HTTP %s (is it the node's --metrics address?)", u, resp.Status)
	}
	var rep peersReport
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxPeersResponse))
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("decode the peer list from %s: %w", u, err)
	}
	return &rep, nil
}

// multistreamHeader is what a libp2p TCP listener writes first
// (multistream-select's protocol line, length-prefixed).
const multistreamHeader = "\x13/multistream/1.0.0\n"

// speaksLibp2p reports whether hostport answers a fresh TCP connection
// with multistream-select's header within a second: a libp2p port given
// where an HTTP address was wanted.
func speaksLibp2p(ctx context.Context, hostport string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, len(multistreamHeader))
	if _, err := io.ReadFull(c, buf); err != nil {
		return false
	}
	return string(buf) == multistreamHeader
}

func admissionWords(adm peer.Admission) string {
	if !adm.Admitted {
		return "NOT ADMITTED (" + adm.Reason + ")"
	}
	if adm.Via == peer.AdmittedQuorum {
		var is []string
		for _, i := range adm.Issuers {
			is = append(is, short(i.String()))
		}
		return fmt.Sprintf("ADMITTED via quorum of %d (%s)", len(adm.Issuers), strings.Join(is, ", "))
	}
	return "ADMITTED (" + adm.Via + ")"
}

func refWords(r *peer.AttestationRef) string {
	state := "valid"
	if !r.Valid {
		state = "expired"
	}
	src := protocol.SourceName(r.ChallengeSource)
	if r.Accepted && !r.MeetsSource {
		src += " (below policy)"
	}
	return fmt.Sprintf("%-8s %-13s issued %s  expires %s  %s  source %s", verdictWord(r.Accepted, ""), r.Reason,
		r.IssuedAt.UTC().Format(time.RFC3339), r.ExpiresAt.UTC().Format(time.RFC3339), state, src)
}

// printPeers prints rep; only is the peer --peer asked for ("" for all).
func printPeers(w io.Writer, rep *peersReport, now time.Time, only string) {
	head := "peers known"
	if rep.Self != "" {
		head += " to " + rep.Self
	}
	req := "unknown"
	if rep.RequireSource != "" {
		req = string(rep.RequireSource)
	}
	fmt.Fprintf(w, "%s (from the %s; trust quorum %d; require source %s)\n", head, rep.Source, rep.TrustQuorum, req)
	if rep.Stats != nil && rep.Stats.ChallengesExhausted > 0 {
		// The node's own warning is in its log; whoever asks it here
		// should see it too (challenges_exhausted in --json).
		fmt.Fprintf(w, "challenge source exhausted: %d session(s) since the node started found no set to serve and ended inconclusive (--max-serves, the pool)\n", rep.Stats.ChallengesExhausted)
	}
	switch {
	case len(rep.Peers) == 0 && only != "" && only == rep.Self:
		// It read "unknown here", of the node's own ID.
		fmt.Fprintf(w, "%s is this node itself: its peers are listed without --peer\n", only)
		return
	case len(rep.Peers) == 0 && only != "":
		fmt.Fprintf(w, "%s is unknown here: no attestation of it, by it or about it\n", only)
		return
	case len(rep.Peers) == 0:
		fmt.Fprintln(w, "no peers")
		return
	}
	for _, p := range rep.Peers {
		fmt.Fprintf(w, "\n%s  %s\n", p.Peer, admissionWords(p.Admission))
		if p.Direct != nil {
			fmt.Fprintf(w, "  ours          %s\n", refWords(p.Direct))
		}
		for i := range p.Vouchers {
			v := &p.Vouchers[i]
			counts := ""
			if v.Counts {
				counts = "  counts"
			}
			prov := v.Source
			if v.From != "" {
				prov += " from " + short(v.From.String())
			}
			fmt.Fprintf(w, "  by %-10s %s%s  (%s)\n", short(v.Issuer.String()), refWords(v), counts, prov)
		}
		if p.AboutUs != nil {
			fmt.Fprintf(w, "  about us      %s\n", refWords(p.AboutUs))
		}
		if p.RevokedAt != nil {
			fmt.Fprintf(w, "  revoked at    %s\n", p.RevokedAt.UTC().Format(time.RFC3339))
		}
		if p.BlockedUntil != nil {
			fmt.Fprintf(w, "  blocked until %s\n", p.BlockedUntil.UTC().Format(time.RFC3339))
		}
		if g := p.LastGate; g != nil {
			what := "refused (" + g.Reason + ")"
			if g.Admitted {
				what = "served (" + g.Via + ")"
			}
			fmt.Fprintf(w, "  last gate     %s %s %s ago, %d stream(s)\n", g.Protocol, what, now.Sub(g.At).Round(time.Second), g.Streams)
		}
	}
}

// keyFileID is the peer ID of the key file at path when it exists and
// holds a libp2p private key.
func keyFileID(path string) (lpeer.ID, bool) {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return "", false
	}
	k, err := crypto.UnmarshalPrivateKey(data)
	if err != nil {
		return "", false
	}
	id, err := lpeer.IDFromPrivateKey(k)
	return id, err == nil
}
