// Package eval measures aCAPTCHA's separation claims (paper §6.3–6.4):
// it runs script attackers (package attack), configured LLM agents and a
// Monte Carlo human model through the real session state machine over many
// sessions, and reports per-class pass rates with confidence intervals,
// failure breakdowns by reasoning type, the human timing distribution, the
// threshold sweep and the feasible tau window, as JSON, text tables and
// plots.
package eval
