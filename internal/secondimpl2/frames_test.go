package secondimpl2

import (
	"bufio"
	"errors"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Frame bodies (protocol.md §3, proto/wire.proto).
const (
	bHello     = 1
	bHelloAck  = 2
	bProbe     = 3
	bProbeAck  = 4
	bChallenge = 5
	bAnswer    = 6
	bDecline   = 7
	bVerdict   = 8
)

const (
	capVerifier = 64 << 10
	capProver   = 1 << 10
)

type hello struct {
	SpecVersion          string
	VerifierID, ProverID []byte
	Nonce                []byte
	Rounds, TauMs        uint32
	TotalMs              uint32
	Reciprocal           bool
	RTTCreditMs          uint32
	PowDifficulty        uint32
}

type helloAck struct {
	Nonce, Pow []byte
	Reciprocal int32
	// the verifier's payment asked (protocol.md §5b): D_v and its nonce
	PayDifficulty uint32
	PayNonce      []byte
}

type probe struct {
	Seq   uint32
	Nonce []byte
	// Pay is the verifier's payment (§5b), field 3 of a Probe only: a
	// ProbeAck has no field 3 (one would be an unknown field).
	Pay []byte
}

type challenge struct {
	Round, Rounds               uint32
	Domain, Narrative, Question string
	BudgetMs                    uint32
	Kind                        string
}

type answer struct {
	Round  uint32
	Answer string
}

type decline struct {
	Reason int32
	Detail string
	// Reciprocal is field 3, with VERIFY_FIRST only (protocol.md §3,
	// §5c): whether the prover verifies the verifier now, valued as
	// HelloAck.reciprocal (§1a); 0 otherwise.
	Reciprocal int32
}

type roundResult struct {
	Round, BudgetMs, EffectiveMs uint32
	Correct                      bool
	ElapsedMs                    uint32
}

type verdict struct {
	Accepted    bool
	Reason      string
	FailedRound uint32
	Detail      string
	Rounds      []roundResult
	Attestation []byte
}

// frame is one decoded Frame: Body names the oneof case set.
type frame struct {
	Body      int
	Hello     *hello
	HelloAck  *helloAck
	Probe     *probe // also ProbeAck
	Challenge *challenge
	Answer    *answer
	Decline   *decline
	Verdict   *verdict
}

func encodeFrame(f *frame) []byte {
	var body enc
	switch f.Body {
	case bHello:
		h := f.Hello
		body.bytes(1, []byte(h.SpecVersion))
		body.bytes(2, h.VerifierID)
		body.bytes(3, h.ProverID)
		body.bytes(4, h.Nonce)
		body.varint(5, uint64(h.Rounds))
		body.varint(6, uint64(h.TauMs))
		body.varint(7, uint64(h.TotalMs))
		body.boolean(8, h.Reciprocal)
		body.varint(9, uint64(h.RTTCreditMs))
		body.varint(10, uint64(h.PowDifficulty))
	case bHelloAck:
		a := f.HelloAck
		body.bytes(1, a.Nonce)
		body.bytes(2, a.Pow)
		body.varint(3, uint64(int64(a.Reciprocal)))
		body.varint(4, uint64(a.PayDifficulty))
		body.bytes(5, a.PayNonce)
	case bProbe, bProbeAck:
		body.varint(1, uint64(f.Probe.Seq))
		body.bytes(2, f.Probe.Nonce)
		if f.Body == bProbe {
			body.bytes(3, f.Probe.Pay)
		}
	case bChallenge:
		c := f.Challenge
		body.varint(1, uint64(c.Round))
		body.varint(2, uint64(c.Rounds))
		body.bytes(3, []byte(c.Domain))
		body.bytes(4, []byte(c.Narrative))
		body.bytes(5, []byte(c.Question))
		body.varint(6, uint64(c.BudgetMs))
		body.bytes(7, []byte(c.Kind))
	case bAnswer:
		body.varint(1, uint64(f.Answer.Round))
		body.bytes(2, []byte(f.Answer.Answer))
	case bDecline:
		body.varint(1, uint64(int64(f.Decline.Reason)))
		body.bytes(2, []byte(f.Decline.Detail))
		body.varint(3, uint64(int64(f.Decline.Reciprocal)))
	case bVerdict:
		v := f.Verdict
		body.boolean(1, v.Accepted)
		body.bytes(2, []byte(v.Reason))
		body.varint(3, uint64(v.FailedRound))
		body.bytes(4, []byte(v.Detail))
		for _, r := range v.Rounds {
			var re enc
			re.varint(1, uint64(r.Round))
			re.varint(2, uint64(r.BudgetMs))
			re.varint(3, uint64(r.EffectiveMs))
			re.boolean(4, r.Correct)
			re.varint(5, uint64(r.ElapsedMs))
			body.message(5, re, true)
		}
		body.bytes(6, v.Attestation)
	}
	var fr enc
	fr.message(protowire.Number(f.Body), body, true)
	out := protowire.AppendVarint(nil, uint64(len(fr)))
	return append(out, fr...)
}

// decodeFrame decodes a Frame message (no length prefix). Exactly one body
// must be set: the last oneof field wins, consecutive occurrences of the
// same case merge.
func decodeFrame(b []byte) (*frame, error) {
	fs, err := parseFields(b)
	if err != nil {
		return nil, err
	}
	body := 0
	var cat []byte
	for _, f := range fs {
		if f.num >= 1 && f.num <= 8 && f.typ == protowire.BytesType {
			if int(f.num) != body {
				body, cat = int(f.num), nil
			}
			cat = append(cat, f.b...)
		}
	}
	if body == 0 {
		return nil, errDecode
	}
	pf, err := parseFields(cat)
	if err != nil {
		return nil, err
	}
	m := msg(pf)
	out := &frame{Body: body}
	s := func(n protowire.Number) string {
		v, e := m.str(n)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	bs := func(n protowire.Number) []byte { v, _ := m.bytes(n); return v }
	switch body {
	case bHello:
		out.Hello = &hello{SpecVersion: s(1), VerifierID: bs(2), ProverID: bs(3), Nonce: bs(4),
			Rounds: m.u32(5), TauMs: m.u32(6), TotalMs: m.u32(7), Reciprocal: m.boolean(8),
			RTTCreditMs: m.u32(9), PowDifficulty: m.u32(10)}
	case bHelloAck:
		out.HelloAck = &helloAck{Nonce: bs(1), Pow: bs(2), Reciprocal: m.i32(3),
			PayDifficulty: m.u32(4), PayNonce: bs(5)}
	case bProbe:
		out.Probe = &probe{Seq: m.u32(1), Nonce: bs(2), Pay: bs(3)}
	case bProbeAck:
		out.Probe = &probe{Seq: m.u32(1), Nonce: bs(2)}
	case bChallenge:
		out.Challenge = &challenge{Round: m.u32(1), Rounds: m.u32(2), Domain: s(3), Narrative: s(4),
			Question: s(5), BudgetMs: m.u32(6), Kind: s(7)}
	case bAnswer:
		out.Answer = &answer{Round: m.u32(1), Answer: s(2)}
	case bDecline:
		out.Decline = &decline{Reason: m.i32(1), Detail: s(2), Reciprocal: m.i32(3)}
	case bVerdict:
		v := &verdict{Accepted: m.boolean(1), Reason: s(2), FailedRound: m.u32(3), Detail: s(4), Attestation: bs(6)}
		rs, e := m.repeated(5)
		if e != nil {
			return nil, e
		}
		for _, r := range rs {
			v.Rounds = append(v.Rounds, roundResult{Round: r.u32(1), BudgetMs: r.u32(2),
				EffectiveMs: r.u32(3), Correct: r.boolean(4), ElapsedMs: r.u32(5)})
		}
		out.Verdict = v
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

var (
	errOversized = errors.New("secondimpl2: frame over the cap")
	errPrefix    = errors.New("secondimpl2: bad length prefix")
)

// readUvarint reads one minimal unsigned varint (protocol.md §2: no
// trailing 0x80 groups, at most 9 bytes: a 9th byte with its high bit set
// overflows, whatever follows). EOF before the first byte is io.EOF,
// after it io.ErrUnexpectedEOF.
func readUvarint(r *bufio.Reader) (uint64, error) {
	var n uint64
	for i := 0; ; i++ {
		c, err := r.ReadByte()
		if err != nil {
			if i > 0 && err == io.EOF {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if i == 8 && c >= 0x80 {
			return 0, errPrefix
		}
		n |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, errPrefix // non-minimal
			}
			return n, nil
		}
	}
}

// readFrame reads one frame with a minimal uvarint prefix, refusing one
// above capBytes as soon as the prefix is read (protocol.md §2).
func readFrame(r *bufio.Reader, capBytes int) (*frame, error) {
	n, err := readUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(capBytes) {
		return nil, errOversized
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return decodeFrame(buf)
}
