package httpgw

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/acaptcha/acaptcha/protocol"
)

// Error codes of the HTTP door (spec/http.md §6). Every error response
// is a JSON object {code, message}, with the status of the code's row in
// errorTable; the code strings are stable, the messages are for people.
const (
	CodeBadRequest           = "bad_request"
	CodeBodyTooLarge         = "body_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeBadPeerID            = "bad_peer_id"
	CodeBadKey               = "bad_key"
	CodeBadSignature         = "bad_signature"
	CodeUnpaid               = "unpaid"
	CodeQuota                = "quota"
	CodeTooManySessions      = "too_many_sessions"
	CodeRateLimited          = "rate_limited"
	CodeUnknownSession       = "unknown_session"
	CodeExpiredSession       = "expired_session"
	CodeWrongState           = "wrong_state"
	CodeWrongRound           = "wrong_round"
	CodeBadProbe             = "bad_probe"
	CodeNoSource             = "no_source"
	CodeUnavailable          = "unavailable"
	CodeNotFound             = "not_found"
	CodeMethod               = "method_not_allowed"
	CodeInternal             = "internal"
)

// errorRow is one row of the error table.
type errorRow struct {
	Code   string
	Status int
	// Sentinel, when set, maps errors wrapping it to this row.
	Sentinel error
	// When says what the row means (the spec's table is generated from
	// the same words; TestErrorTableDocumented checks they agree).
	When string
}

// Sentinels of the gateway itself.
var (
	errBadRequest      = errors.New("bad request")
	errBodyTooLarge    = errors.New("request body too large")
	errMediaType       = errors.New("unsupported media type")
	errBadPeerID       = errors.New("bad peer ID")
	errBadKey          = errors.New("bad public key")
	errBadSignature    = errors.New("bad signature")
	errTooManySessions = errors.New("too many sessions")
	errRateLimited     = errors.New("request rate limit")
	errUnknownSession  = errors.New("unknown session")
	errExpiredSession  = errors.New("session expired")
	errWrongState      = errors.New("wrong session state")
	errWrongRound      = errors.New("answer for another round")
	errBadProbe        = errors.New("probe ack does not match the probe")
	errUnavailable     = errors.New("gateway unavailable")
	errNotFound        = errors.New("no such route")
	errMethod          = errors.New("method not allowed")
)

// errorTable maps every error the gateway returns to a status and a code.
// The first row whose sentinel the error wraps wins; anything else is
// CodeInternal.
var errorTable = []errorRow{
	{CodeBadRequest, http.StatusBadRequest, errBadRequest, "the body is not the JSON object the route takes, a field is missing or malformed"},
	{CodeBodyTooLarge, http.StatusRequestEntityTooLarge, errBodyTooLarge, "the body exceeds the route's cap"},
	{CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, errMediaType, "a POST request's Content-Type is not application/json (a charset, if given, utf-8)"},
	{CodeBadPeerID, http.StatusBadRequest, errBadPeerID, "peer_id is not a libp2p peer ID"},
	{CodeBadKey, http.StatusBadRequest, errBadKey, "public_key does not decode, is of a key the rules refuse (ECDSA on another curve than P-256), or the peer ID does not derive from it; the session is aborted"},
	{CodeBadSignature, http.StatusUnauthorized, errBadSignature, "the signature over the start message does not verify with public_key; the session is aborted"},
	{CodeUnpaid, http.StatusPaymentRequired, protocol.ErrUnpaid, "the proof of work does not pay pow_difficulty; the session is aborted and the peer's difficulty rises"},
	{CodeQuota, http.StatusTooManyRequests, protocol.ErrPeerQuota, "the peer's, the prefix's or the node's set-draw budget is spent"},
	{CodeTooManySessions, http.StatusTooManyRequests, errTooManySessions, "too many open or unstarted sessions in total, from this IP prefix or IPv6 /32, or running for this peer"},
	{CodeRateLimited, http.StatusTooManyRequests, errRateLimited, "this IP prefix, its IPv6 block, or all clients together, sent creates and verifies, or reads, faster than the door's request rates (§5); retry after a second"},
	{CodeUnknownSession, http.StatusNotFound, errUnknownSession, "no such session (never created, or forgotten after it ended)"},
	{CodeExpiredSession, http.StatusGone, errExpiredSession, "the session ended without a verdict (not started in time, a probe unanswered, the gateway closing)"},
	{CodeWrongState, http.StatusConflict, errWrongState, "the route does not apply to the session's state (e.g. an answer while probing)"},
	{CodeWrongRound, http.StatusConflict, errWrongRound, "an answer names another round than the one delivered; the session ends protocol_error (signed) and the body carries the verdict"},
	{CodeBadProbe, http.StatusConflict, errBadProbe, "a probe ack does not echo the probe's seq and nonce; the session ends protocol_error (signed) and the body carries the verdict"},
	{CodeNoSource, http.StatusServiceUnavailable, protocol.ErrNoSource, "this node has no challenge source: it cannot verify"},
	{CodeUnavailable, http.StatusServiceUnavailable, errUnavailable, "the gateway or its node is closing"},
	{CodeUnavailable, http.StatusServiceUnavailable, protocol.ErrClosed, "the node's attestation service is closed"},
	{CodeNotFound, http.StatusNotFound, errNotFound, "no such route"},
	{CodeMethod, http.StatusMethodNotAllowed, errMethod, "the route does not take this method"},
	{CodeInternal, http.StatusInternalServerError, nil, "anything else (a bug or a storage failure); the message says what"},
}

// classify returns the row of err.
func classify(err error) errorRow {
	for _, r := range errorTable {
		if r.Sentinel != nil && errors.Is(err, r.Sentinel) {
			return r
		}
	}
	return errorTable[len(errorTable)-1]
}

// ErrorBody is the JSON body of every error response (spec/http.md §6).
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Session is the session's state when the error ended it with a
	// verdict (wrong_round, bad_probe).
	Session *Session `json:"session,omitempty"`
}

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// Error makes an error response an error for clients.
func (e *ErrorBody) Error() string { return e.Code + ": " + e.Message }
