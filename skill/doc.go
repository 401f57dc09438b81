// Package skill is the transport-free verifier skill of acaptcha: the
// challenge model, challenge sources, answer matching, the timing policy and
// the human timing model, and the per-session state machine that turns timed
// answers into a verdict.
//
// Nothing here knows about libp2p; the same session logic can serve any
// transport. The wire protocol lives in package protocol.
package skill
