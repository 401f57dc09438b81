package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
)

func (a *app) challengeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "challenge",
		Short: "Work with challenge set files",
	}
	var crossCheck, brief, strict bool
	inspect := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Validate a challenge set file and print it readably, with what each script attacker answered",
		Long: `Decodes a challenge set (paper-schema JSON) and runs the validation pipeline
of acaptcha generate on it: structure, leakage and the script attackers, and
with --cross-check also the --llm solver. By default the set is checked as a
verifier would serve it (the files acaptcha generate writes have lost the
questions that failed); --strict applies every rule of raw generator output. Prints every part and question
with its answers, reasoning and answer types, the attackers' answers, and
which questions a verifier would serve. Exits 0 when the set is accepted, 1
when it is rejected. --llm, --llm-base-url, --cross-check-llm and
--answer-max-tokens serve --cross-check only: given without it they are
refused (exit 2) rather than ignored.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !crossCheck {
				// The LLM flags configure the cross-check solver and
				// nothing else here: `inspect F --llm M` ran no LLM and
				// said nothing. Only flags typed on the command line are
				// refused (an ACAPTCHA_LLM exported for the node is no
				// request to cross-check).
				for _, name := range []string{"llm", "llm-base-url", "cross-check-llm", "answer-max-tokens"} {
					if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
						return usageErr("--%s is used only with --cross-check (add --cross-check to have the LLM solve every question, or leave --%s out)", name, name)
					}
				}
			}
			data, err := readFileCapped(args[0], skill.MaxSetFileBytes)
			switch {
			case errors.Is(err, errInputTooLarge):
				// A file too large is no set a node would load: rejected
				// (exit 1), as attestations verify treats an oversized
				// record, not a usage error.
				return a.inspectFailed(args[0], &generate.Report{Reason: generate.RejectMalformed, Detail: "not a challenge set: " + err.Error()}, nil)
			case err != nil:
				return usageErr("%s: %v", args[0], err)
			}
			set, err := generate.DecodeOutput(string(data))
			if err != nil {
				// The decoder speaks of a model's reply; here it is the
				// user's file ("malformed generator output: empty reply"
				// read as if a generator had run).
				detail := strings.TrimPrefix(err.Error(), generate.ErrMalformed.Error()+": ")
				detail = strings.Replace(detail, "reply", "file", 1)
				return a.inspectFailed(args[0], &generate.Report{Reason: generate.RejectMalformed, Detail: "not a challenge set: " + detail}, nil)
			}
			// A set file (plain JSON, not a model's fenced reply) is
			// also held to what a node loading it as a corpus requires
			// (skill.DecodeSet): the model-output decoder above repairs
			// what a model gets wrong (a long distractor list, say) and
			// would pass a file the node refuses to start with.
			if json.Valid(data) {
				if _, err := skill.DecodeSet(data); err != nil {
					// Well-formed JSON that decodes but breaks a rule of
					// the set ({}: 0 parts) is a structure failure, not
					// malformed JSON (spec/generation.md's reasons).
					reason := generate.RejectMalformed
					if errors.Is(err, skill.ErrInvalidSet) {
						reason = generate.RejectStructure
					}
					return a.inspectFailed(args[0], &generate.Report{Reason: reason,
						Detail: "a node refuses this file as a corpus set: " + err.Error()}, nil)
				}
			}
			if set.ID == "" {
				// The ID a node serving this file gives it, and its
				// attestations name (set_id): as skill.DecodeSet does.
				set.ID = set.ContentID()
			}
			pol, err := a.policy()
			if err != nil {
				return err
			}
			vcfg := generate.ValidatorConfig{Policy: &pol, AnswerMaxTokens: a.answerTokens, Logger: a.log}
			if crossCheck {
				if a.llmSpec == "" {
					return usageErr("--cross-check needs --llm: %s", noLLMHint)
				}
				m, err := a.newModel(cmd.Context(), a.llmSpec, 0)
				if err != nil {
					return err
				}
				vcfg.CrossCheck = append(vcfg.CrossCheck, m)
				if a.gen.crossCheck != "" {
					m2, err := a.newModel(cmd.Context(), a.gen.crossCheck, 0)
					if err != nil {
						return err
					}
					vcfg.CrossCheck = append(vcfg.CrossCheck, m2)
				}
			}
			v, err := generate.NewValidator(vcfg)
			if err != nil {
				return usageErr("%v", err)
			}
			ctx, cancel := contextWithTimeout(cmd, 10*time.Minute)
			defer cancel()
			rep, err := v.Run(ctx, set, generate.Mode{Fresh: strict, CrossCheck: crossCheck, Full: true})
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := writeJSON(a, inspectJSON(args[0], set, rep)); err != nil {
					return err
				}
			} else {
				printInspect(a.stdout, args[0], set, rep, !brief)
			}
			if !rep.Accepted() {
				return verdictErr(rep.Err())
			}
			return nil
		},
	}
	inspect.Flags().BoolVar(&crossCheck, "cross-check", false, "also cross-check every answer with the --llm solver (and --cross-check-llm)")
	inspect.Flags().BoolVar(&brief, "brief", false, "do not print the narratives")
	a.addFlags(inspect.Flags(), groupLLM, groupPolicy, groupCrossCheck)
	inspect.Flags().BoolVar(&strict, "strict", false, "check the file as a generator's raw output: every question count, answer type and chain rule of generation (a validated set has lost questions and fails them)")
	cmd.AddCommand(inspect)
	return cmd
}

// inspectFailed reports a set that did not even decode.
func (a *app) inspectFailed(file string, rep *generate.Report, set *skill.Set) error {
	if a.jsonOut {
		if err := writeJSON(a, inspectJSON(file, set, rep)); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "%s: REJECTED (%s): %s\n", file, rep.Reason, rep.Detail)
	}
	return verdictErr(rep.Err())
}

type inspectOut struct {
	File      string          `json:"file"`
	Accepted  bool            `json:"accepted"`
	Reason    generate.Reason `json:"reason,omitempty"`
	Detail    string          `json:"detail,omitempty"`
	Domain    string          `json:"domain,omitempty"`
	ID        string          `json:"id,omitempty"`
	Tokens    []int           `json:"narrative_tokens,omitempty"`
	Questions []inspectQuest  `json:"questions,omitempty"`
	Drops     []generate.Drop `json:"drops,omitempty"`
	// Served is the set a verifier would serve: without the dropped
	// questions.
	Served *skill.Set    `json:"served_set,omitempty"`
	Usage  *inspectUsage `json:"cross_check_tokens,omitempty"`
}

type inspectUsage struct {
	Input  int `json:"input"`
	Output int `json:"output"`
	Calls  int `json:"calls"`
}

type inspectQuest struct {
	Part          int                       `json:"part"`
	Question      int                       `json:"question"`
	Text          string                    `json:"text"`
	Answer        string                    `json:"answer"`
	Answers       []string                  `json:"answers"`
	ReasoningType skill.ReasoningType       `json:"reasoning_type"`
	AnswerType    skill.AnswerType          `json:"answer_type"`
	DependsOn     []int                     `json:"depends_on,omitempty"`
	Kept          bool                      `json:"kept"`
	Dropped       generate.Reason           `json:"dropped,omitempty"`
	Scripts       []generate.AttackerAnswer `json:"scripts,omitempty"`
	Checks        []generate.CheckAnswer    `json:"cross_checks,omitempty"`
}

func inspectJSON(file string, set *skill.Set, rep *generate.Report) inspectOut {
	out := inspectOut{File: file, Accepted: rep.Accepted(), Reason: rep.Reason, Detail: rep.Detail, Drops: rep.Drops, Served: rep.Set}
	if set != nil {
		out.Domain, out.ID = set.Domain, set.ID
		for _, p := range set.Parts {
			out.Tokens = append(out.Tokens, skill.CountTokens(p.Narrative))
		}
	}
	for _, q := range rep.Questions {
		out.Questions = append(out.Questions, inspectQuest{
			Part: q.Part, Question: q.Question, Text: q.Q.Question, Answer: q.Q.Answer, Answers: q.Q.Variants(),
			ReasoningType: q.Q.ReasoningType, AnswerType: q.Q.AnswerType, DependsOn: q.Q.DependsOn,
			Kept: q.Dropped == "", Dropped: q.Dropped, Scripts: q.Scripts, Checks: q.Checks,
		})
	}
	if rep.Calls > 0 {
		out.Usage = &inspectUsage{Input: rep.Usage.InputTokens, Output: rep.Usage.OutputTokens, Calls: rep.Calls}
	}
	return out
}

func printInspect(w io.Writer, file string, set *skill.Set, rep *generate.Report, narratives bool) {
	fmt.Fprintf(w, "%s\n", file)
	fmt.Fprintf(w, "domain %s, id %s\n", set.Domain, set.ID)
	byPart := map[int][]generate.QuestionReport{}
	for _, q := range rep.Questions {
		byPart[q.Part] = append(byPart[q.Part], q)
	}
	for pi, p := range set.Parts {
		fmt.Fprintf(w, "\n== part %d: %d tokens, %d questions\n", pi+1, skill.CountTokens(p.Narrative), len(p.Questions))
		if narratives {
			for _, line := range strings.Split(strings.TrimSpace(p.Narrative), "\n") {
				fmt.Fprintf(w, "  | %s\n", line)
			}
		}
		for _, q := range byPart[pi+1] {
			status := "kept"
			if q.Dropped != "" {
				status = "DROPPED (" + string(q.Dropped) + ")"
			}
			deps := ""
			if len(q.Q.DependsOn) > 0 {
				deps = fmt.Sprintf(", needs part %s", joinInts(q.Q.DependsOn))
			}
			fmt.Fprintf(w, "\n  Q%d.%d [%s, %s%s] %s\n", q.Part, q.Question, q.Q.ReasoningType, q.Q.AnswerType, deps, status)
			fmt.Fprintf(w, "    %s\n", q.Q.Question)
			fmt.Fprintf(w, "    answer: %s", q.Q.Answer)
			if vs := q.Q.Variants(); len(vs) > 1 {
				fmt.Fprintf(w, "   (also accepted: %s)", strings.Join(vs[1:], " | "))
			}
			fmt.Fprintln(w)
			if len(q.Scripts) > 0 {
				var parts []string
				for _, s := range q.Scripts {
					mark := ""
					if s.Correct {
						mark = " (CORRECT)"
					}
					parts = append(parts, fmt.Sprintf("%s=%q%s", s.Attacker, s.Answer, mark))
				}
				fmt.Fprintf(w, "    scripts: %s\n", strings.Join(parts, ", "))
			}
			for _, c := range q.Checks {
				switch {
				case c.Err != "":
					fmt.Fprintf(w, "    cross-check %s: error: %s\n", c.Model, c.Err)
				default:
					fmt.Fprintf(w, "    cross-check %s: %q correct=%v\n", c.Model, c.Answer, c.Correct)
				}
			}
		}
	}
	fmt.Fprintln(w)
	if rep.Calls > 0 {
		fmt.Fprintf(w, "cross-check: %d calls, %d input / %d output tokens\n", rep.Calls, rep.Usage.InputTokens, rep.Usage.OutputTokens)
	}
	if set.Provenance != nil && set.Provenance.Source == skill.SourceProcedural {
		// The validator does not filter procedural sets by their
		// white-box inverter (it answers nearly every question): "kept"
		// above says nothing about a script written against the
		// generator.
		fmt.Fprintf(w, "note: %s, the script written against the procedural generator, is not among the scripts above: it reads procedural text back to its answers and passes a large share of procedural sessions (README, \"What a script can do\"); sets of this source back attestations of source procedural only\n", attack.ProceduralInverter)
	}
	if rep.Accepted() {
		kept := make([]string, len(rep.Set.Parts))
		for i, p := range rep.Set.Parts {
			kept[i] = fmt.Sprint(len(p.Questions))
		}
		fmt.Fprintf(w, "ACCEPTED: questions kept per part %s (served as set %s)\n", strings.Join(kept, "/"), rep.Set.ID)
		return
	}
	fmt.Fprintf(w, "REJECTED (%s): %s\n", rep.Reason, rep.Detail)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " and ")
}
