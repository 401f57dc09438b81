// Package attack holds deterministic script attackers against aCAPTCHA
// challenges: programs with no language model that try to answer the
// questions from surface features of the narrative (positions, frequencies,
// keyword overlap, cue words, nearby numbers, label patterns, the first
// label of a stated rule).
//
// Every attacker is a skill.Prover, so it runs through the real session
// state machine (skill.Run) in evaluation and can be served over the libp2p
// transport like any other prover. An attacker's answer depends only on the
// challenges of its own session, so results are reproducible.
//
// The attackers are the project's measure of the paper's claim (§3.2
// criterion 2, §5.3 "anti-parsing by design") that a script cannot
// understand a challenge: they are written to be as strong as honest,
// generator-agnostic heuristics get. They do not know any generator's
// templates; an attacker that did would be stronger, and the pass rates
// reported here are a lower bound on what a determined script author
// achieves.
//
// The white-box attackers (WhiteBox, Listing) are that stronger author:
// whitebox-procedural inverts skill/procedural's own rendering (it reads the
// generator's vocabulary through its public API), whitebox-prompt exploits
// what the LLM generation and hybrid rewording prompts promise, the
// structure attackers (whitebox-series, whitebox-scatter) what those
// prompts make every narrative and question hold (steady readings of the
// persisting candidate listed in one sentence, the count a mean is taken
// over, the answer entity scattered over separate paragraphs),
// whitebox-chain what the chained rounds share (the candidate the earlier
// narratives and its own answers carry on),
// whitebox-survivor what the validator's filter leaves (it runs the
// filter's attackers and answers with the best candidate none gave), and
// candidate-list answers with a list of candidates to show that the matcher
// refuses lists. They see only what the wire carries, like the others.
package attack
