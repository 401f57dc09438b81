package secondimpl2

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"time"
)

// A client of spec/http.md, written from the text alone.

const (
	startTag = "acaptcha/http/start/v1"
)

// ---- peer IDs (http.md §1: base58btc multihash) ----

const b58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

func b58Encode(b []byte) string {
	n := new(big.Int).SetBytes(b)
	var out []byte
	mod := new(big.Int)
	base := big.NewInt(58)
	for n.Sign() > 0 {
		n.DivMod(n, base, mod)
		out = append(out, b58Alphabet[mod.Int64()])
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

func b58Decode(s string) ([]byte, error) {
	n := new(big.Int)
	base := big.NewInt(58)
	zeros := 0
	for i := 0; i < len(s) && s[i] == '1'; i++ {
		zeros++
	}
	for _, c := range []byte(s) {
		i := strings.IndexByte(b58Alphabet, c)
		if i < 0 {
			return nil, fmt.Errorf("base58: bad character %q", c)
		}
		n.Mul(n, base)
		n.Add(n, big.NewInt(int64(i)))
	}
	return append(make([]byte, zeros), n.Bytes()...), nil
}

// identity is an Ed25519 libp2p identity (http.md §1).
type identity struct {
	priv   ed25519.PrivateKey
	pubKey []byte // protobuf PublicKey{Type: Ed25519 (1), Data}
	id     []byte // binary peer ID
	idStr  string
}

func newIdentity() identity {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand failing is not a test outcome
	}
	pub := priv.Public().(ed25519.PublicKey)
	k := marshalPubKey(1, pub)
	id := peerIDFromKey(1, pub)
	return identity{priv: priv, pubKey: k, id: id, idStr: b58Encode(id)}
}

func u32b(b []byte, n int) []byte { return binary.BigEndian.AppendUint32(b, uint32(n)) }

// startMessage is http.md §4.2.
func startMessage(sessionID string, nonce, verifier, subject []byte) []byte {
	b := []byte(startTag)
	b = append(b, 0)
	b = u32b(b, len(sessionID))
	b = append(b, sessionID...)
	b = u32b(b, 32)
	b = append(b, nonce...)
	b = u32b(b, len(verifier))
	b = append(b, verifier...)
	b = u32b(b, len(subject))
	b = append(b, subject...)
	return b
}

// solvePoW is http.md §4.2 step 4 with the walk-through's counter (§7).
func solvePoW(nonce, subject []byte, d int) ([]byte, error) {
	if d == 0 {
		return nil, nil
	}
	pre := append(append([]byte(powTag), nonce...), subject...)
	for c := uint64(0); c < 1<<32; c++ {
		p := binary.BigEndian.AppendUint64(nil, c)
		h := sha256.Sum256(append(append([]byte{}, pre...), p...))
		if leadingZeros(h) >= d {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no proof of work of %d bits under 2^32", d)
}

// ---- HTTP ----

type client struct {
	base string
	hc   *http.Client
}

func newClient(base string) *client {
	return &client{base: base, hc: &http.Client{Timeout: 30 * time.Second}}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (c *client) do(method, path string, body any) (reply, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return reply{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: reading: %w", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// session is the session object of http.md §4.
type session struct {
	SessionID     string          `json:"session_id"`
	State         string          `json:"state"`
	PeerID        string          `json:"peer_id"`
	Verifier      string          `json:"verifier"`
	ExpiresAt     string          `json:"expires_at"`
	Nonce         []byte          `json:"nonce"`
	PowDifficulty *int            `json:"pow_difficulty"`
	StartMessage  []byte          `json:"start_message"`
	Policy        *policy         `json:"policy"`
	Probe         *probeObj       `json:"probe"`
	Challenge     *challengeObj   `json:"challenge"`
	Result        *result         `json:"result"`
	Error         *errObj         `json:"error"`
	Raw           json.RawMessage `json:"-"`
}

type policy struct {
	Rounds      int      `json:"rounds"`
	TauMs       int64    `json:"tau_ms"`
	DerivedTau  bool     `json:"derived_tau"`
	Alpha       *float64 `json:"alpha"`
	TotalMs     int64    `json:"total_ms"`
	RTTCreditMs int64    `json:"rtt_credit_ms"`
}

type probeObj struct {
	Seq      int    `json:"seq"`
	Of       int    `json:"of"`
	Nonce    []byte `json:"nonce"`
	WithinMs int64  `json:"within_ms"`
}

type challengeObj struct {
	Round          int    `json:"round"`
	Rounds         int    `json:"rounds"`
	Domain         string `json:"domain"`
	Narrative      string `json:"narrative"`
	Question       string `json:"question"`
	BudgetMs       int64  `json:"budget_ms"`
	Kind           string `json:"kind"`
	AnswerWithinMs int64  `json:"answer_within_ms"`
}

type resultRound struct {
	Round       int   `json:"round"`
	Answered    bool  `json:"answered"`
	Correct     bool  `json:"correct"`
	BudgetMs    int64 `json:"budget_ms"`
	ElapsedMs   int64 `json:"elapsed_ms"`
	EffectiveMs int64 `json:"effective_ms"`
}

type result struct {
	Accepted    bool            `json:"accepted"`
	Verdict     string          `json:"verdict"`
	Reason      string          `json:"reason"`
	FailedRound int             `json:"failed_round"`
	Detail      string          `json:"detail"`
	Rounds      []resultRound   `json:"rounds"`
	RTTMs       int64           `json:"rtt_ms"`
	CreditMs    int64           `json:"credit_ms"`
	Attestation []byte          `json:"attestation"`
	Record      json.RawMessage `json:"record"`
}

type errObj struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Session json.RawMessage `json:"session"`
}

func decodeSession(b []byte) (*session, error) {
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("session %s: %w", b, err)
	}
	s.Raw = b
	return &s, nil
}

func decodeErr(b []byte) (*errObj, error) {
	var e errObj
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("error body %s: %w", b, err)
	}
	if e.Code == "" {
		return nil, fmt.Errorf("error body without code: %s", b)
	}
	return &e, nil
}

func b64s(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
