package secondimpl2

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// isWhite is the Unicode White_Space property (verification.md, "Human
// timing model").
func isWhite(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0d, r == 0x20, r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

var folder = cases.Fold()

// normAnswer is verification.md's norm: trim, NFC, full case folding.
func normAnswer(s string) string {
	s = strings.TrimFunc(s, isWhite)
	return folder.String(norm.NFC.String(s))
}

// narrativeTokens is L = floor((4*words+1)/3).
func narrativeTokens(s string) int {
	return (4*len(strings.FieldsFunc(s, isWhite)) + 1) / 3
}

func lowerBoundNs(l int) int64 {
	v := float64(l) / 5
	v += 0.35
	v += 10 / 0.9
	v *= 1e9
	return int64(v)
}

// derivedBudgetMs and whether the human check allows it.
func derivedBudgetMs(l int, alpha float64) (int64, bool) {
	lb := lowerBoundNs(l)
	tauNs := int64(alpha * float64(lb))
	ms := (tauNs + 500_000) / 1_000_000
	return ms, ms*1_000_000 <= int64(0.25*float64(lb))
}

type specQuestion struct {
	Question    string   `json:"question"`
	Answer      string   `json:"answer"`
	Answers     []string `json:"answers,omitempty"`
	Distractors []string `json:"distractors,omitempty"`
}

type specPart struct {
	Narrative string         `json:"narrative"`
	Questions []specQuestion `json:"questions"`
}

type specSet struct {
	Kind   string     `json:"kind,omitempty"`
	Domain string     `json:"domain"`
	Parts  []specPart `json:"parts"`
}

func frame8(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// setIDInput and setID are attestation.md §3.3.
func setIDInput(s *specSet) []byte {
	var b []byte
	if s.Kind != "" && s.Kind != "narrative" {
		b = append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		b = frame8(b, s.Kind)
	}
	b = frame8(b, s.Domain)
	for _, p := range s.Parts {
		b = frame8(b, p.Narrative)
		for _, q := range p.Questions {
			b = frame8(b, q.Question)
			b = frame8(b, q.Answer)
		}
	}
	return b
}

func setID(s *specSet) string {
	h := sha256.Sum256(setIDInput(s))
	return hex.EncodeToString(h[:16])
}

type tRound struct {
	Round                       int    `json:"round"`
	Narrative, Question, Answer string `json:"-"`
}

func frame4(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// transcriptInput is attestation.md §4 (answers cut by the caller).
func transcriptInput(kind string, rounds []tRound) []byte {
	b := []byte("acaptcha/transcript/v1")
	if kind != "" && kind != "narrative" {
		b = append(b, 0xff, 0xff, 0xff, 0xff)
		b = frame4(b, kind)
	}
	for _, r := range rounds {
		b = binary.BigEndian.AppendUint32(b, uint32(r.Round))
		b = frame4(b, r.Narrative)
		b = frame4(b, r.Question)
		b = frame4(b, cutAnswer(r.Answer))
	}
	return b
}

func transcriptDigest(kind string, rounds []tRound) []byte {
	h := sha256.Sum256(transcriptInput(kind, rounds))
	return h[:]
}

// cutAnswer: longest prefix of at most 64 bytes on a character boundary.
func cutAnswer(s string) string {
	if len(s) <= 64 {
		return s
	}
	i := 64
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

const powTag = "acaptcha/attest/pow/v1\x00"

func powDigest(nonce, requester, pow []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(powTag))
	h.Write(nonce)
	h.Write(requester)
	h.Write(pow)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

func leadingZeros(d [32]byte) int {
	n := 0
	for _, c := range d {
		if c == 0 {
			n += 8
			continue
		}
		return n + bits.LeadingZeros8(c)
	}
	return n
}

func powValid(nonce, requester, pow []byte, d int) bool {
	if d == 0 {
		return true
	}
	if d > 32 || len(pow) < 1 || len(pow) > 32 {
		return false
	}
	return leadingZeros(powDigest(nonce, requester, pow)) >= d
}

func solvePow(nonce, requester []byte, d int) []byte {
	for i := uint64(0); ; i++ {
		p := binary.BigEndian.AppendUint64(nil, i)
		if powValid(nonce, requester, p, d) {
			return p
		}
	}
}

// reflection (protocol.md §7)
func reflNorm(s string) string {
	s = folder.String(norm.NFC.String(s))
	return strings.Join(strings.FieldsFunc(s, isWhite), " ")
}

func reflDigest(narr, q string) [32]byte {
	return sha256.Sum256([]byte(reflNorm(narr) + "\x00" + reflNorm(q)))
}

// reflWords are the words of §7: the runs of letters and decimal digits
// of the word key of normalised text.
func reflWords(s string) []string {
	var key []rune
	for _, r := range s {
		key = append(key, wordKeyOf(r)...)
	}
	return strings.FieldsFunc(string(key), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.Is(unicode.Nd, r))
	})
}

// wordKeyOf is K(c) of §7.
func wordKeyOf(c rune) []rune {
	if c < 0x80 {
		return []rune{unicode.ToLower(c)}
	}
	if unicode.IsMark(c) || unicode.Is(unicode.Cf, c) || unicode.Is(unicode.Variation_Selector, c) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, c) {
		return nil
	}
	if unicode.Is(unicode.Nd, c) {
		// Digits come in runs of ten from zero: the value is how many
		// digits precede c in its run.
		v := 0
		for unicode.Is(unicode.Nd, c-rune(v)-1) {
			v++
		}
		return []rune{'0' + rune(v%10)}
	}
	keys := func(s string) []rune {
		var out []rune
		for _, r := range s {
			out = append(out, wordKeyOf(r)...)
		}
		return out
	}
	ascii := func(rs []rune) bool {
		for _, r := range rs {
			if r >= 0x80 {
				return false
			}
		}
		return true
	}
	if d := norm.NFKD.String(string(c)); d != string(c) {
		return keys(d)
	}
	if !unicode.IsLetter(c) {
		return []rune{c}
	}
	own := confusables.Skeleton(string(c))
	if own != string(c) {
		if k := keys(own); ascii(k) {
			return k
		}
	}
	if up := unicode.ToUpper(c); up != c {
		if sk := confusables.Skeleton(string(up)); sk != string(up) {
			if k := keys(sk); ascii(k) {
				return k
			}
		}
	}
	if own != string(c) {
		return keys(own)
	}
	return []rune{c}
}

const fnvP = 0x100000001b3

func wordHash(w string) uint64 {
	h := uint64(0xcbf29ce484222325)
	b := []byte(w)
	for len(b) > 0 {
		var c [8]byte
		n := copy(c[:], b)
		b = b[n:]
		h = (h ^ binary.LittleEndian.Uint64(c[:])) * fnvP
	}
	return h
}

func fmix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func shingles(words []string) []uint64 {
	wh := make([]uint64, len(words))
	for i, w := range words {
		wh[i] = wordHash(w)
	}
	n := 5
	if len(wh) < n {
		n = len(wh)
	}
	var out []uint64
	for i := 0; i+n <= len(wh) && n > 0; i++ {
		x := uint64(0)
		for _, h := range wh[i : i+n] {
			x = x*fnvP + h
		}
		out = append(out, fmix64(x))
	}
	return out
}

func sketch(narr, q string) []uint64 {
	words := append(reflWords(reflNorm(narr)), reflWords(reflNorm(q))...)
	sh := shingles(words)
	seen := map[uint64]bool{}
	var out []uint64
	for _, h := range sh {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) > 64 {
		out = out[:64]
	}
	return out
}

// jaccard of two sketches: of the (at most 64) smallest distinct hashes of
// the union, the fraction in both.
func jaccard(a, b []uint64) float64 {
	in := map[uint64]int{}
	for _, h := range a {
		in[h] |= 1
	}
	for _, h := range b {
		in[h] |= 2
	}
	var u []uint64
	for h := range in {
		u = append(u, h)
	}
	sort.Slice(u, func(i, j int) bool { return u[i] < u[j] })
	if len(u) > 64 {
		u = u[:64]
	}
	if len(u) == 0 {
		return 0
	}
	both := 0
	for _, h := range u {
		if in[h] == 3 {
			both++
		}
	}
	return float64(both) / float64(len(u))
}
