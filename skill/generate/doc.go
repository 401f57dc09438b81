// Package generate writes fresh challenge sets with a language model and
// keeps a pool of validated sets ready for verifier sessions.
//
// A Generator asks the configured model for one three-part narrative set
// in a chosen domain (Domains lists the built-in ones), with a prompt of
// our own that asks for everything a good aCAPTCHA set needs: chained
// parts that refer back only indirectly, neutral candidates told apart
// only by implicit cues, misleading interim conclusions, numeric
// distractors, scattered facts, varied formats, aliases, and short
// deterministic answers with their accepted variants. Every request
// carries a jittered temperature, a random seed and random scenario
// prompts, so two nodes do not converge on the same text.
//
// The reply is decoded strictly (one surrounding code fence is tolerated,
// nothing else) and then validated in order of cost:
//
//  1. structure: counts, narrative lengths, answer lengths and variants,
//     reasoning- and answer-type diversity, the chain between parts, and
//     the verifier's timing policy;
//  2. leakage: no later part or question states an earlier answer, no
//     explicit verdict words, no question containing its own answer;
//  3. script resistance: every attacker of package attack answers every
//     question, in every context of earlier rounds a session can produce,
//     the generic ones and the white-box ones of the set's source
//     (attack.WhiteBox; see ValidatorConfig.WhiteBox); a question any of
//     them answers, as skill.Judge judges it (an answer holding one
//     number also by that number alone), is dropped;
//  4. cross-validation: fresh solve.Solver sessions (the prover's own path,
//     without the answers) and optionally a second provider must
//     reproduce every remaining answer (judged by skill.Judge with the
//     narratives shown so far); a question that fails is dropped.
//
// Generated sets carry their provenance: skill.SourceLLM with the model's
// provider:model name. The Hybrid generator rewords a procedural
// skeleton's narratives (one request per part) and its questions (one
// request per set), checks both for fact survival, and marks its sets
// skill.SourceHybrid, with LLMQuestions when every served question was
// reworded.
//
// A part left without questions rejects the set. Every rejection and
// every dropped question has a machine reason (Reason) and is counted in
// Stats together with the tokens of every call, so the cost per accepted
// set includes the attempts that were thrown away.
//
// A Pool keeps validated sets ready in a PoolStore (the node's bbolt
// store, or memory), refilled by a bounded number of background workers
// up to a fixed size, so generation never sits on the path of a handshake
// and peers cannot make a node spend tokens by opening sessions. Each set
// is served at most MaxServes times, expires after MaxAge, and is taken
// atomically; when the pool is empty Next waits a bounded time and then
// fails with an error wrapping skill.ErrExhausted, which ends the session
// inconclusive.
package generate
