package generate

import (
	"errors"
	"fmt"
	"time"
)

// Reason is the machine reason for rejecting a generated set or dropping
// one of its questions.
type Reason string

// Reasons a whole set is rejected. Each attempt that yields no set ends
// with exactly one of them.
const (
	// RejectLLMError: the generation call failed (provider error, HTTP
	// status, refused request).
	RejectLLMError Reason = "llm_error"
	// RejectDeadline: the generation call did not complete in time.
	RejectDeadline Reason = "deadline"
	// RejectRateLimited: the provider kept refusing with HTTP 429 after
	// the bounded retries.
	RejectRateLimited Reason = "rate_limited"
	// RejectTruncated: the reply was still cut at the token limit after
	// retrying with larger limits.
	RejectTruncated Reason = "truncated"
	// RejectEmpty: the model returned no text.
	RejectEmpty Reason = "empty_output"
	// RejectMalformed: the reply is not exactly one JSON set object.
	RejectMalformed Reason = "malformed_json"
	// RejectStructure: counts, lengths, answers, types or the chain
	// between parts do not meet Params.
	RejectStructure Reason = "structure"
	// RejectPolicy: a narrative is too short for the verifier's timing
	// policy to give it a budget.
	RejectPolicy Reason = "policy"
	// RejectLeakage: a later part or question states an earlier answer,
	// or a narrative uses explicit verdict words.
	RejectLeakage Reason = "leakage"
	// RejectScript: script attackers answered every question of a part.
	RejectScript Reason = "script_answerable"
	// RejectCrossCheck: the cross-checking solvers failed to reproduce
	// every question of a part.
	RejectCrossCheck Reason = "cross_check"
)

// Reasons a single question is dropped from a set that may survive.
const (
	// DropAnswerInQuestion: the question text contains its own answer.
	DropAnswerInQuestion Reason = "answer_in_question"
	// DropScript: a script attacker answered the question (Drop.By names
	// it).
	DropScript Reason = "script"
	// DropCrossCheckDisagree: a solver gave another answer (Drop.By names
	// the model).
	DropCrossCheckDisagree Reason = "cross_check_disagree"
	// DropCrossCheckError: a solver call failed, so the answer could not
	// be reproduced.
	DropCrossCheckError Reason = "cross_check_error"
)

// SetReasons lists every set rejection reason in pipeline order.
var SetReasons = []Reason{RejectLLMError, RejectDeadline, RejectRateLimited, RejectTruncated, RejectEmpty,
	RejectMalformed, RejectStructure, RejectPolicy, RejectLeakage, RejectScript, RejectCrossCheck}

// DropReasons lists every question drop reason in pipeline order.
var DropReasons = []Reason{DropAnswerInQuestion, DropScript, DropCrossCheckDisagree, DropCrossCheckError}

// ErrRejected is wrapped by every RejectError.
var ErrRejected = errors.New("generated set rejected")

// RejectError reports a rejected set with its reason.
type RejectError struct {
	Reason Reason
	Detail string
	// Wait is the provider's Retry-After of a RejectRateLimited attempt
	// (0 when it said none).
	Wait time.Duration
}

// RetryAfter implements pool.ProviderWait: a pool pauses at least Wait
// before its next production.
func (e *RejectError) RetryAfter() time.Duration { return e.Wait }

func (e *RejectError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%v: %s", ErrRejected, e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", ErrRejected, e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrRejected) hold.
func (e *RejectError) Unwrap() error { return ErrRejected }

// Drop records one dropped question.
type Drop struct {
	Part     int    // 1-based part
	Question int    // 1-based index in the part as generated
	Reason   Reason // one of the Drop* reasons
	// By names the attacker or model that answered, for DropScript and
	// the cross-check reasons.
	By string
	// Answer is what it answered (empty for DropAnswerInQuestion).
	Answer string
	Detail string
}

// Key is the counter key of a drop in Stats: the reason, with the
// attacker's name for script drops ("script:router").
func (d Drop) Key() string {
	if d.Reason == DropScript && d.By != "" {
		return string(d.Reason) + ":" + d.By
	}
	return string(d.Reason)
}

// RejectReason implements pool.Rejection.
func (e *RejectError) RejectReason() string { return string(e.Reason) }

// ProviderFailure implements pool.Rejection: the provider failed (an LLM
// error, a deadline, a rate limit, an empty reply) rather than the
// content being rejected.
func (e *RejectError) ProviderFailure() bool {
	switch e.Reason {
	case RejectLLMError, RejectDeadline, RejectRateLimited, RejectEmpty:
		return true
	}
	return false
}

// contentRejection reports whether err rejects a set for its content
// rather than for a failure of the provider.
func contentRejection(err error) bool {
	var re *RejectError
	return errors.As(err, &re) && !re.ProviderFailure()
}
