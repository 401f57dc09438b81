package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

type demoProver struct {
	name   string
	kind   string
	prover skill.Prover
	note   string
}

type demoRow struct {
	Prover   string        `json:"prover"`
	Kind     string        `json:"kind"`
	PeerID   string        `json:"peer_id,omitempty"`
	Ran      bool          `json:"ran"`
	Accepted bool          `json:"accepted"`
	Reason   skill.Reason  `json:"reason,omitempty"`
	Failed   int           `json:"failed_round,omitempty"`
	Detail   string        `json:"detail,omitempty"`
	Rounds   []roundJSON   `json:"rounds,omitempty"`
	Note     string        `json:"note,omitempty"`
	Took     time.Duration `json:"took_ns"`
}

func (a *app) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run a local verifier against several provers in one process and show who passes and why",
		Long: `Starts a verifier node and one prover node per prover class on loopback,
in this process, and runs a full verification of each prover over libp2p:
a generic script (the router: it guesses the answer type and combines the
heuristic attackers), a responder that reads at human speed and then answers
with the script's guess, a white-box script written against this code and
its prompts (for the kind of challenges served: whitebox-procedural, or
whitebox-prompt for corpus, hybrid and LLM-written sets), and, when an LLM is
configured with --llm, an agent backed by it. Nothing is stored
outside a temporary directory. Exits 0 when the demo ran; with --llm, 1
when the agent was not accepted (so a script can check an LLM with it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runDemo(cmd.Context())
		},
	}
}

func (a *app) runDemo(ctx context.Context) error {
	pol, err := a.policy()
	if err != nil {
		return err
	}
	// The demo serves the same few sets to several provers, so it lifts
	// the serve-once rule for its in-memory ledger.
	src, err := a.source(nil, 1<<20)
	if err != nil {
		return err
	}
	router, ok := attack.ByName(attack.Router)
	if !ok {
		return fmt.Errorf("demo: script attacker %q missing", attack.Router)
	}
	provers := []demoProver{
		{name: "script (" + router.Name + ")", kind: "script", prover: router.Prover, note: router.Description},
		{name: "human-speed reader", kind: "human", prover: humanReader{model: pol.Human, guess: router.Prover}, note: "needs at least the paper's Eq. 6 lower bound per round (reads 5 tokens/s, decides in 350 ms, types 0.9 tokens/s), then answers with the script's guess"},
	}
	// The honest row: a script written against this code. On procedural
	// challenges (text rendered from a public grammar) it passes often;
	// on LLM-written or LLM-reworded challenges the validator drops what
	// it answers.
	kind := challengeKind(a.challenges)
	if kind == skill.SourceUnknown {
		kind = skill.SourceProcedural
	}
	if wb := attack.WhiteBox(kind); len(wb) > 0 {
		w := wb[len(wb)-1]
		if kind == skill.SourceProcedural {
			w = wb[0]
		}
		note := "a script written by someone who read this code: " + w.Description + ". It passes a large share of procedural sessions (README, \"What a script can do\"); that is why real nodes write their challenges with their LLM (--challenges llm or hybrid)"
		if kind != skill.SourceProcedural {
			note = "a script written by someone who read this code and its prompts: " + w.Description + ". On " + string(kind) + " challenges the set validator drops the questions it answers (README, \"What a script can do\")"
		}
		provers = append(provers, demoProver{name: "white-box script (" + w.Name + ")", kind: "whitebox", prover: w.Prover, note: note})
	}
	agent, llmName, err := a.prover(ctx)
	if err != nil {
		return err
	}
	// The agent's own errors: a prover does not tell its verifier why it
	// failed ("answerer failed"), but the demo runs both sides and says.
	var agentErr demoErr
	if agent != nil {
		agent = agentErr.wrap(agent)
		provers = append(provers, demoProver{name: "agent (" + llmName + ")", kind: "agent", prover: agent, note: "answers with the configured LLM, all rounds in one conversation"})
	}
	dir, err := os.MkdirTemp("", "acaptcha-demo-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	newNode := func(name string, source skill.Source, pr skill.Prover) (*peer.Node, error) {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("demo key: %w", err)
		}
		cfg := peer.Config{
			Key: k, StorePath: filepath.Join(dir, name+".db"),
			ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
			Policy:      pol, Source: source, Prover: pr, Logger: a.log,
			// The demo shows verdicts, not admission; it serves procedural
			// challenges by default, so it says so and sets its policy
			// explicitly rather than inherit the node default (hybrid).
			RequireSource: skill.SourceProcedural,
		}
		if source != nil {
			cfg.SourceKind = challengeKind(a.challenges)
		}
		return peer.New(cfg)
	}
	verifier, err := newNode("verifier", src, nil)
	if err != nil {
		return err
	}
	defer verifier.Close()
	if !a.jsonOut {
		fmt.Fprintf(a.stdout, "verifier %s serving %s; %d round(s), tau %s, total %s\n", short(verifier.ID().String()), src.Name(), pol.Rounds, tauString(pol), pol.Total)
		fmt.Fprintf(a.stdout, "running %d prover(s) concurrently over libp2p on loopback (the human-speed reader takes until its first budget runs out)...\n\n", len(provers))
	}
	rows := make([]demoRow, len(provers))
	var wg sync.WaitGroup
	for i, p := range provers {
		rows[i] = demoRow{Prover: p.name, Kind: p.kind, Note: p.note}
		n, err := newNode(fmt.Sprintf("prover%d", i), nil, p.prover)
		if err != nil {
			return err
		}
		defer n.Close()
		rows[i].PeerID = n.ID().String()
		wg.Add(1)
		go func(row *demoRow, n *peer.Node) {
			defer wg.Done()
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, pol.Total+30*time.Second)
			defer cancel()
			if err := verifier.Host().Connect(cctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}); err != nil {
				row.Detail = err.Error()
				return
			}
			res, err := verifier.Verify(cctx, n.ID())
			row.Took = time.Since(start)
			if err != nil {
				row.Detail = err.Error()
				return
			}
			fillRow(row, res)
			if p.kind == "agent" && !row.Accepted {
				if e := agentErr.get(); e != nil {
					row.Detail = strings.TrimPrefix(row.Detail+"; the LLM: "+e.Error(), "; ")
				}
			}
		}(&rows[i], n)
	}
	wg.Wait()
	// A signal cut the sessions short: say so in the rows it stopped
	// (Main exits 130).
	interrupted := ctx.Err() != nil
	if interrupted {
		for i := range rows {
			if !rows[i].Ran {
				rows[i].Detail = "interrupted"
			}
		}
	}
	if agent == nil {
		rows = append(rows, demoRow{Prover: "agent (LLM)", Kind: "agent", Note: "not run: " + noLLMHint})
	}
	if a.jsonOut {
		out := map[string]any{"verifier": verifier.ID().String(), "source": src.Name(), "total_ms": pol.Total.Milliseconds(), "rows": rows}
		// Durations in whole milliseconds, as everywhere under --json:
		// tau_ms for a fixed tau, alpha for a derived one.
		if pol.DeriveTau {
			out["derive_tau"], out["alpha"] = true, pol.Alpha
		} else {
			out["tau_ms"] = pol.Tau.Milliseconds()
		}
		if interrupted {
			out["interrupted"] = true
		}
		if err := writeJSON(a, out); err != nil {
			return err
		}
		return demoOutcome(ctx, rows, agent != nil)
	}
	if interrupted {
		fmt.Fprintln(a.stdout, "INTERRUPTED: the sessions were stopped early; the rows below are partial")
	}
	if err := printDemoRows(a.stdout, rows); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	for _, r := range rows {
		fmt.Fprintf(a.stdout, "- %s: %s\n", r.Prover, r.Note)
	}
	return demoOutcome(ctx, rows, agent != nil)
}

// demoOutcome is the demo's exit: interrupted (130), or, when an LLM is
// configured, a negative result (exit 1, the rows said why) if its agent
// was not accepted, so that `acaptcha demo --llm ...` checks an LLM in a
// script. Without an LLM the demo shows the other rows and exits 0.
func demoOutcome(ctx context.Context, rows []demoRow, withAgent bool) error {
	if err := demoInterrupted(ctx); err != nil {
		return err
	}
	if !withAgent {
		return nil
	}
	for _, r := range rows {
		if r.Kind == "agent" && !r.Accepted {
			why := string(r.Reason)
			if why == "" {
				why = r.Detail
			}
			return verdictErr(fmt.Errorf("demo: the agent (%s) was not accepted: %s", r.Prover, why))
		}
	}
	return nil
}

// printDemoRows prints the demo's verdict table.
func printDemoRows(w io.Writer, rows []demoRow) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVER\tVERDICT\tREASON\tROUNDS (effective / budget)")
	for _, r := range rows {
		if !r.Ran {
			v, why := "NOT RUN", "no LLM configured (see below)"
			if r.Detail != "" {
				v, why = "ERROR", r.Detail
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Prover, v, "-", why)
			continue
		}
		var rs []string
		for _, x := range r.Rounds {
			mark := "ok"
			switch {
			case !x.Answered:
				mark = "no answer"
			case !x.Correct:
				mark = fmt.Sprintf("wrong: %q", x.Answer)
			case x.EffectiveMS > x.BudgetMS:
				mark = "late"
			}
			rs = append(rs, fmt.Sprintf("r%d %s/%s %s", x.Round, msString(x.EffectiveMS), msString(x.BudgetMS), mark))
		}
		why := strings.Join(rs, "; ")
		if !r.Accepted && r.Detail != "" && (len(rs) == 0 || r.Reason == skill.ReasonInconclusive || r.Reason == skill.ReasonDeclined) {
			// An inconclusive session says why (e.g. the timing policy
			// refused the set), and so does a declined one (e.g. the
			// LLM could not be reached); a rejection's rounds say it
			// already.
			why = strings.TrimPrefix(why+"; "+r.Detail, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Prover, verdictWord(r.Accepted, r.Reason), r.Reason, why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return nil
}

// demoInterrupted is the demo's error when a signal stopped it.
func demoInterrupted(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("demo: %w", context.Cause(ctx))
	}
	return nil
}

func fillRow(row *demoRow, res *protocol.Result) {
	v := res.Verdict
	row.Ran = true
	row.Accepted, row.Reason, row.Failed, row.Detail = v.Accepted, v.Reason, v.FailedRound, v.Detail
	row.Rounds = roundsJSON(v.Rounds)
}

func msString(ms int64) string {
	if ms == 0 {
		return "<1ms"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func tauString(p skill.Policy) string {
	if p.DeriveTau {
		return fmt.Sprintf("derived (alpha %.2g)", p.Alpha)
	}
	return p.Tau.String()
}

// humanReader models a person at a keyboard: it needs at least the paper's
// lower bound (Eq. 6) for each round before it can answer, then answers
// with its best keyword guess. It holds no answer key.
type humanReader struct {
	model skill.HumanModel
	guess skill.Prover
}

func (h humanReader) NewSession() skill.Answerer {
	guess := h.guess.NewSession()
	return skill.AnswerFunc(func(ctx context.Context, c skill.Challenge) (string, error) {
		d := h.model.LowerBound(skill.CountTokens(c.Narrative))
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return guess.Answer(ctx, c)
	})
}

// demoErr records the first error of the demo agent's answerer.
type demoErr struct {
	mu  sync.Mutex
	err error
}

func (d *demoErr) wrap(p skill.Prover) skill.Prover {
	return skill.ProverFunc(func() skill.Answerer {
		ans := p.NewSession()
		return skill.AnswerFunc(func(ctx context.Context, c skill.Challenge) (string, error) {
			out, err := ans.Answer(ctx, c)
			if err != nil && ctx.Err() == nil {
				d.mu.Lock()
				if d.err == nil {
					d.err = err
				}
				d.mu.Unlock()
			}
			return out, err
		})
	})
}

func (d *demoErr) get() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
