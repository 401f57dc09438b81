// Package attack holds deterministic script attackers against aCAPTCHA
// challenges: programs with no language model that try to answer the
// questions from surface features of the narrative (positions, frequencies,
// keyword overlap, cue words, nearby numbers, label patterns).
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
package attack
