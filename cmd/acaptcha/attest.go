package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

func (a *app) attestCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "attest MULTIADDR",
		Short: "Mutually attest with a running node and print both verdicts",
		Long: `Connects to the node at MULTIADDR (ending in /p2p/PEER_ID), verifies it with
chained timed rounds, and asks it to verify this node back. Both verdicts are
printed and their signed attestations stored. Without --llm this side cannot
answer challenges: the peer is verified and not asked to verify us back.

Exit codes: 0 the remote peer was accepted; 1 it was not (rejected, declined
to be verified, e.g. a node without an LLM, busy, e.g. a node whose LLM
does not answer, or the session was inconclusive, or the session failed), or a
runtime failure (a key file or store that cannot be used); 2 usage error (an
unknown flag, a value out of range, a malformed address); 3
network error (unreachable, or no answer within --timeout); 130 interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ai, err := peer.ParseAddr(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			if len(ai.Addrs) == 0 {
				// attest discovers no peers (no mDNS, DHT or peer
				// store to look the ID up in): there is nothing to dial.
				return usageErr("%s names no address to dial, only a peer ID (attest discovers no peers): give the node's full multiaddr as it prints it, e.g. /ip4/203.0.113.5/tcp/4717/p2p/%s", args[0], ai.ID)
			}
			if timeout < 0 {
				return usageErr("--timeout %s: want a positive duration, or 0 for the default", timeout)
			}
			listen := a.listen
			if len(listen) == 0 {
				listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
			}
			if fl := cmd.Flags().Lookup("pool-size"); fl != nil && !fl.Changed {
				// One session draws one set: a pool of the node's
				// default size would write sets nobody reads.
				a.gen.poolSize = 1
			}
			n, _, err := a.startNode(cmd, listen, nil)
			if err != nil {
				return err
			}
			if ai.ID == n.ID() {
				a.closeNode(n)
				return usageErr("%s is this node's own peer ID (--key %s): attest another node", ai.ID, a.keyFile)
			}
			defer func() {
				a.closeNode(n)
			}()
			if timeout <= 0 {
				pol, _ := a.policy()
				timeout = 2*pol.Total + 30*time.Second
			}
			// Our own preparation (the LLM check, writing our challenge)
			// has a --timeout of its own: the sessions with the peer get
			// the whole of theirs after it.
			prep, cancelPrep := contextWithFlagTimeout(cmd, "--timeout", timeout)
			defer cancelPrep()
			if a.guard != nil {
				// Without its LLM this side can only fail the peer's
				// session (signed as a rejection that then stands): say
				// so now, for a rate limit or an empty reply too.
				// A slow answerer (a local model loading) holds the check
				// up to a minute: say what we wait for.
				noticed := make(chan struct{})
				slow := time.AfterFunc(llmCheckNotice, func() {
					defer close(noticed)
					if a.jsonOut {
						a.log.Info("checking the LLM before contacting the peer", "llm", a.llmSpec)
					} else {
						fmt.Fprintf(a.stderr, "checking --llm %s before contacting the peer (it has not answered yet)...\n", a.llmSpec)
					}
				})
				err := a.guard.CheckAnswers(prep)
				if !slow.Stop() {
					<-noticed // the notice is written before what follows
				}
				if err != nil {
					return fmt.Errorf("--llm %s does not answer (checked before contacting the peer, which could not have verified us): %w", a.llmSpec, err)
				}
			}
			if err := a.awaitChallengeSet(prep); err != nil {
				return err
			}
			cancelPrep()
			ctx, cancel := contextWithTimeout(cmd, timeout)
			defer cancel()
			var m *peer.Mutual
			if a.llmSpec == "" {
				// Without an LLM our side declines every challenge, so a
				// reciprocal verdict can never come: verify the peer only,
				// and say why we did not ask it to verify us.
				a.log.Warn("attest without --llm: the peer is verified but not asked to verify us back", "reason", errNoLLMReciprocal)
				m, err = verifyOnly(ctx, n, ai)
			} else {
				m, err = n.Attest(ctx, ai)
			}
			if err != nil {
				if errors.Is(err, protocol.ErrDeclined) {
					// The peer refused to be verified (it has no LLM,
					// speaks another version, ...): an answer, not a
					// failure of this command. Nothing was signed.
					return a.printDeclined(ai.ID, err)
				}
				if rf := (*peer.RejectedFirstError)(nil); errors.As(err, &rf) {
					// A verify-first peer verified us and did not accept
					// us: a verdict (its signed one on us), not a failure
					// of this command.
					return a.printRejectedFirst(n.ID().String(), rf)
				}
				if errors.Is(err, protocol.ErrVerifyFirst) {
					// A verify-first peer that will not verify us now (we
					// are in its back-off, or it accepted us but does not
					// admit us): an answer, as BUSY is.
					return a.printVerifyFirst(n, ai.ID, err)
				}
				if errors.Is(err, protocol.ErrBusy) {
					// The peer refused the session for now (its LLM does
					// not answer, or its limits are reached): an answer
					// too, with nothing signed.
					return a.printBusy(ai.ID, err)
				}
				if errors.Is(err, peer.ErrNetwork) || errors.Is(err, protocol.ErrNetwork) || errors.Is(err, context.DeadlineExceeded) {
					// Unreachable, or silent until --timeout.
					if errors.Is(ctx.Err(), context.DeadlineExceeded) {
						// "context deadline exceeded" alone does not
						// say which limit ran out.
						err = fmt.Errorf("gave up after --timeout %s (the peer is unreachable or silent): %w", timeout, err)
					}
					return &exitError{code: exitNetwork, err: err}
				}
				// Any other failure: the peer was not accepted (exit 1).
				return err
			}
			if a.jsonOut {
				if err := writeJSON(a, mutualJSON(n.ID().String(), m)); err != nil {
					return err
				}
			} else {
				printMutual(a.stdout, n.ID().String(), m)
			}
			if !m.Ours.Verdict.Accepted {
				return verdictErr(fmt.Errorf("peer %s not accepted: %s", m.Peer, m.Ours.Verdict.Reason))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "time limit of the sessions with the peer (default twice the total budget plus 30 s): a session whose first challenge was sent runs on to its verdict within the protocol's own deadlines (so that a peer cannot escape a signed rejection by stalling past it); checking --llm and writing our challenge before them have a limit of the same length")
	return cmd
}

// printDeclined reports a peer that declined to be verified at the
// hello: DECLINED, exit 1 (not accepted), no record signed.
func (a *app) printDeclined(p lpeer.ID, err error) error {
	return a.printRefused(p, err, "declined", string(skill.ReasonDeclined),
		"DECLINED (it refused to be verified; nothing signed)",
		"a peer that declines to be verified is not asked to verify us",
		"it declined to be verified")
}

// printBusy reports a peer that refused the session for now (BUSY at the
// hello: its answerer is down or its limits are reached): exit 1 (not
// accepted), no record signed, worth trying again later.
func (a *app) printBusy(p lpeer.ID, err error) error {
	return a.printRefused(p, err, "busy", "busy",
		"BUSY (it cannot be verified now: its LLM does not answer or its limits are reached; nothing signed, try again later)",
		"a peer that refuses to be verified is not asked to verify us now",
		"it is busy")
}

// printRefused reports a peer that refused its session at the hello: the
// verdict word (JSON verdict and reason, text ours), why the peer was not
// asked to verify us (text and JSON theirs) and why it is not accepted,
// on stdout; exit 1 (not accepted), no record signed.
func (a *app) printRefused(p lpeer.ID, err error, verdict, reason, ours, notAsked, why string) error {
	if a.llmSpec == "" {
		// Without an LLM this side asks no one to verify it, whatever the
		// peer answered.
		notAsked = strings.TrimPrefix(errNoLLMReciprocal.Error(), "not asked: ")
	}
	if a.jsonOut {
		if e := writeJSON(a, map[string]any{"peer": p.String(), "ours": map[string]any{
			"verdict": verdict, "accepted": false, "reason": reason, "detail": err.Error(), "signed": false,
			"attestation_signed": false, // the key a session's result has (mutualJSON)
		},
			// theirs as a session's result without a verdict back has it
			// (mutualJSON): the text's "its verdict of us" line.
			"theirs": map[string]any{"error": "not asked: " + notAsked},
		}); e != nil {
			return e
		}
	} else {
		fmt.Fprintf(a.stdout, "peer %s\n  our verdict of it: %s\n    %v\n", p, ours, err)
		fmt.Fprintf(a.stdout, "  its verdict of us: none (%s)\n", notAsked)
	}
	return verdictErr(fmt.Errorf("peer %s not accepted: %s", p, why))
}

// printRejectedFirst reports a peer that verifies us before it answers us
// (spec/protocol.md §5c) and did not accept us: its verdict on us as a
// session's result prints it, and none of ours (we ran no session with
// it), on stdout; exit 1 (not accepted). Before, it was an error line
// alone (with --json an error object), its signed verdict unprinted.
func (a *app) printRejectedFirst(self string, rf *peer.RejectedFirstError) error {
	const why = "it verifies us before it answers us, and did not accept us: we ran no session with it"
	t := &rf.Theirs
	if a.jsonOut {
		m := mutualJSON(self, &peer.Mutual{Peer: rf.Peer, Ours: &protocol.Result{}, Theirs: t})
		m["ours"] = map[string]any{"verdict": "none", "accepted": false, "reason": "verify_first", "detail": why, "signed": false, "attestation_signed": false}
		if err := writeJSON(a, m); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "peer %s\n  our verdict of it: none (%s)\n", rf.Peer, why)
		fmt.Fprintf(a.stdout, "%s verified us: %s (%s) after %d round(s)", short(rf.Peer.String()), verdictWord(t.Accepted, t.Reason), t.Reason, t.Rounds)
		if t.Detail != "" {
			fmt.Fprintf(a.stdout, " - %s", t.Detail)
		}
		fmt.Fprintln(a.stdout)
		if t.Attestation != nil {
			fmt.Fprintf(a.stdout, "  their signed attestation verified and stored (expires %s)\n", t.Attestation.ExpiresAt.Format(time.RFC3339))
		} else if t.AttestationErr != nil {
			fmt.Fprintf(a.stdout, "  their attestation did not verify: %v\n", t.AttestationErr)
		}
	}
	return verdictErr(fmt.Errorf("peer %s not accepted: it did not accept us, and verifies us before it answers us", rf.Peer))
}

// printVerifyFirst reports a peer that verifies us before it answers us
// (spec/protocol.md §5c) and would not verify us now, or did not admit
// us: no verdict of ours (we ran no session with it), and its newest
// verdict on us from our store, the reason it will not answer us (a
// rejection whose back-off runs, or an acceptance it does not admit on),
// on stdout; exit 1 (not accepted). Before, it was an error line alone
// (with --json an error object).
func (a *app) printVerifyFirst(n *peer.Node, p lpeer.ID, err error) error {
	const why = "it verifies us before it answers us, and will not answer us now; nothing signed"
	var standing *protocol.Attestation
	if e, lerr := n.Store().Latest(peer.Received, p, time.Now()); lerr == nil && e != nil {
		standing = e.Attestation
	}
	if a.jsonOut {
		th := map[string]any{"error": "none: no verdict of it on us in our store"}
		if t := standing; t != nil {
			th = map[string]any{
				"verifier": p.String(), "subject": n.ID().String(),
				"accepted": t.Accepted, "reason": t.Reason, "failed_round": t.FailedRound,
				"rounds": len(t.Rounds), "attestation_verified": true, "from_store": true, "stored": true,
				"issued_at": t.IssuedAt.UTC().Format(time.RFC3339), "expires_at": t.ExpiresAt.UTC().Format(time.RFC3339),
			}
		}
		if e := writeJSON(a, map[string]any{"peer": p.String(), "ours": map[string]any{
			"verdict": "none", "accepted": false, "reason": "verify_first", "detail": err.Error(), "signed": false, "attestation_signed": false,
		}, "theirs": th}); e != nil {
			return e
		}
	} else {
		fmt.Fprintf(a.stdout, "peer %s\n  our verdict of it: none (%s)\n    %v\n", p, why, err)
		if t := standing; t != nil {
			fmt.Fprintf(a.stdout, "%s verified us earlier: %s (%s); its verdict from our store, issued %s, expires %s\n", short(p.String()), verdictWord(t.Accepted, t.Reason), t.Reason,
				t.IssuedAt.UTC().Format(time.RFC3339), t.ExpiresAt.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(a.stdout, "  its verdict of us: none in our store\n")
		}
	}
	return verdictErr(fmt.Errorf("peer %s not accepted: %s", p, why))
}

// errNoLLMReciprocal is why attest without --llm does not ask the peer to
// verify us back.
var errNoLLMReciprocal = errors.New("not asked: this side has no LLM (--llm), cannot answer challenges and so cannot be verified; only our verdict of the peer is given")

// verifyOnly connects to the peer and verifies it without asking it to
// verify us back.
func verifyOnly(ctx context.Context, n *peer.Node, ai lpeer.AddrInfo) (*peer.Mutual, error) {
	if ai.ID == n.ID() {
		return nil, errors.New("cannot attest ourselves")
	}
	if err := n.Host().Connect(ctx, ai); err != nil {
		return nil, peer.ConnectError(ai.ID, err)
	}
	res, err := n.Verify(ctx, ai.ID)
	if err != nil {
		return nil, err
	}
	return &peer.Mutual{Peer: ai.ID, Ours: res, TheirsErr: errNoLLMReciprocal}, nil
}

func verdictWord(accepted bool, r skill.Reason) string {
	switch {
	case accepted:
		return "ACCEPTED"
	case r == skill.ReasonInconclusive:
		return "INCONCLUSIVE"
	default:
		return "REJECTED"
	}
}

func printMutual(w io.Writer, self string, m *peer.Mutual) {
	v := m.Ours.Verdict
	fmt.Fprintf(w, "we (%s) verified %s: %s (%s)", short(self), short(m.Peer.String()), verdictWord(v.Accepted, v.Reason), v.Reason)
	if v.Detail != "" {
		fmt.Fprintf(w, " - %s", v.Detail)
	}
	fmt.Fprintln(w)
	if len(v.Rounds) > 0 || v.Domain != "" {
		// No round ran (inconclusive, declined at the hello): no RTT was
		// measured and no set named.
		fmt.Fprintf(w, "  rtt %s (credited %s), domain %s\n", m.Ours.RTT.Round(time.Microsecond), m.Ours.Credit.Round(time.Microsecond), v.Domain)
	}
	for _, r := range v.Rounds {
		status := "wrong"
		switch {
		case !r.Answered:
			status = "no answer"
		case r.Correct && r.Effective <= r.Budget:
			status = "correct"
		case r.Correct:
			status = "late"
		}
		fmt.Fprintf(w, "  round %d  %-11s effective %8s / budget %s  answer %q  %s\n", r.Round, r.ReasoningType, r.Effective.Round(time.Millisecond), r.Budget, r.Answer, status)
	}
	if m.Ours.Attestation != nil {
		fmt.Fprintf(w, "  signed attestation stored (expires %s)\n", m.Ours.Attestation.ExpiresAt.Format(time.RFC3339))
	}
	switch {
	case m.Theirs == nil:
		fmt.Fprintf(w, "%s verified us: no verdict (%v)\n", short(m.Peer.String()), m.TheirsErr)
	case m.Theirs.Err != nil:
		fmt.Fprintf(w, "%s verified us: broke off (%v)\n", short(m.Peer.String()), m.Theirs.Err)
	case m.TheirsStored:
		// No new session ran: the peer's verdict on us from our store
		// still stands, so we did not ask for another.
		t := m.Theirs
		fmt.Fprintf(w, "%s verified us earlier: %s (%s) after %d round(s); their standing verdict from our store", short(m.Peer.String()), verdictWord(t.Accepted, t.Reason), t.Reason, t.Rounds)
		if t.Attestation != nil {
			fmt.Fprintf(w, ", issued %s, expires %s", t.Attestation.IssuedAt.Format(time.RFC3339), t.Attestation.ExpiresAt.Format(time.RFC3339))
		}
		fmt.Fprintln(w, " (not asked again while it stands)")
	default:
		t := m.Theirs
		fmt.Fprintf(w, "%s verified us: %s (%s) after %d round(s)", short(m.Peer.String()), verdictWord(t.Accepted, t.Reason), t.Reason, t.Rounds)
		if t.Detail != "" {
			fmt.Fprintf(w, " - %s", t.Detail)
		}
		fmt.Fprintln(w)
		if t.Attestation != nil {
			fmt.Fprintf(w, "  their signed attestation verified and stored (expires %s)\n", t.Attestation.ExpiresAt.Format(time.RFC3339))
		} else if t.AttestationErr != nil {
			fmt.Fprintf(w, "  their attestation did not verify: %v\n", t.AttestationErr)
		}
	}
}

// llmCheckNotice is how long attest's LLM check runs before it says on
// standard error what it waits for.
var llmCheckNotice = 2 * time.Second

// awaitChallengeSet waits until the node's challenge pool (--challenges
// llm or hybrid, the default with --llm) holds a set, so that the
// session on the peer does not end inconclusive while the LLM writes the
// first one: a one-shot attest starts with an empty pool.
func (a *app) awaitChallengeSet(ctx context.Context) error {
	if a.corpusUsedUp {
		// The session could only end inconclusive: say why before
		// dialing rather than after.
		return fmt.Errorf("every set of the challenge corpus has been served --max-serves times already (the count is kept in the store %s): nothing to verify the peer with; add sets, raise --max-serves, or use --challenges llm", a.storePath)
	}
	if a.gen.ready == nil || a.gen.ready() > 0 {
		return nil
	}
	if a.jsonOut {
		// Standard error carries JSON only: the notice is a log record.
		a.log.Info("writing a challenge set before contacting the peer", "llm", a.llmSpec, "challenges", a.challenges)
	} else {
		fmt.Fprintf(a.stderr, "writing a challenge set with %s (--challenges %s) before contacting the peer...\n", a.llmSpec, a.challenges)
	}
	if err := a.waitForSet(ctx); err != nil {
		return fmt.Errorf("no challenge set written (see the log, --log-level info): %w", err)
	}
	return nil
}

// waitSetFailures is how many failed generation attempts in a row make
// waitForSet give up.
const waitSetFailures = 3

// waitForSet waits until the node's challenge pool holds a set (at once
// when its source is no pool), or ctx ends.
func (a *app) waitForSet(ctx context.Context) error {
	if a.gen.ready == nil {
		return nil
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for a.gen.ready() == 0 {
		if a.gen.stats != nil {
			// A pool whose attempts keep failing (a model that does
			// not write valid sets) backs off up to a minute between
			// them: waiting out the whole timeout says nothing more.
			if st := a.gen.stats(); st.ConsecutiveFailures >= waitSetFailures {
				return fmt.Errorf("challenge generation failed %d times in a row (last: %s)", st.ConsecutiveFailures, st.LastError)
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:6] + "…" + id[len(id)-6:]
	}
	return id
}

type roundJSON struct {
	Round         int    `json:"round"`
	ReasoningType string `json:"reasoning_type"`
	Answer        string `json:"answer"`
	Answered      bool   `json:"answered"`
	Correct       bool   `json:"correct"`
	EffectiveMS   int64  `json:"effective_ms"`
	ElapsedMS     int64  `json:"elapsed_ms"`
	BudgetMS      int64  `json:"budget_ms"`
}

func roundsJSON(rs []skill.RoundRecord) []roundJSON {
	out := []roundJSON{}
	for _, r := range rs {
		out = append(out, roundJSON{r.Round, string(r.ReasoningType), r.Answer, r.Answered, r.Correct, r.Effective.Milliseconds(), r.Elapsed.Milliseconds(), r.Budget.Milliseconds()})
	}
	return out
}

func mutualJSON(self string, m *peer.Mutual) map[string]any {
	v := m.Ours.Verdict
	ours := map[string]any{
		"verifier": self, "subject": m.Peer.String(),
		"accepted": v.Accepted, "reason": v.Reason, "failed_round": v.FailedRound, "detail": v.Detail,
		"domain": v.Domain, "rtt_us": m.Ours.RTT.Microseconds(), "credit_us": m.Ours.Credit.Microseconds(),
		"rounds": roundsJSON(v.Rounds), "attestation_signed": m.Ours.Attestation != nil,
	}
	out := map[string]any{"peer": m.Peer.String(), "ours": ours}
	switch {
	case m.Theirs == nil:
		out["theirs"] = map[string]any{"error": fmt.Sprint(m.TheirsErr)}
	default:
		t := m.Theirs
		th := map[string]any{
			"verifier": m.Peer.String(), "subject": self,
			"accepted": t.Accepted, "reason": t.Reason, "failed_round": t.FailedRound, "detail": t.Detail,
			"rounds": t.Rounds, "attestation_verified": t.Attestation != nil,
			// from_store: no new session ran; this is the peer's
			// standing verdict on us from our store. stored is its
			// older name, kept for scripts that read it (it read as
			// "was stored", which a fresh verdict is too).
			"from_store": m.TheirsStored,
			"stored":     m.TheirsStored,
		}
		if t.Attestation != nil {
			th["issued_at"] = t.Attestation.IssuedAt.UTC().Format(time.RFC3339)
			th["expires_at"] = t.Attestation.ExpiresAt.UTC().Format(time.RFC3339)
		}
		if t.Err != nil {
			th["error"] = t.Err.Error()
		}
		if t.AttestationErr != nil {
			th["attestation_error"] = t.AttestationErr.Error()
		}
		out["theirs"] = th
	}
	return out
}
