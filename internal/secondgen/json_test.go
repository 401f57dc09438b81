// Package secondgen is a second implementation of the challenge-set rules of
// spec/generation.md ("Format", validation stage 1, the set identifier of
// attestation.md §3.3, the token count and derived budget of
// verification.md), written from the spec text alone. It is test-only: it
// runs differentially against skill.DecodeSet, Set.Validate and the
// generate package's stage 1 on spec/examples, procedural sets, the shared
// LLM corpus (when present) and mutated sets.
package secondgen

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A strict JSON reader (generation.md "Format": UTF-8, no unpaired
// surrogate escape, one value and nothing after it, no duplicate member).

type jkind int

const (
	jNull jkind = iota
	jBool
	jNum
	jStr
	jArr
	jObj
)

type jval struct {
	k    jkind
	b    bool
	num  string
	s    string
	arr  []*jval
	keys []string
	obj  map[string]*jval
}

type parser struct {
	b []byte
	i int
}

var errJSON = errors.New("json")

func jerr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errJSON, fmt.Sprintf(format, a...))
}

func parseStrict(b []byte) (*jval, error) {
	if !utf8.Valid(b) {
		return nil, jerr("not UTF-8")
	}
	p := &parser{b: b}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, jerr("data after the value at %d", p.i)
	}
	return v, nil
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *parser) value(depth int) (*jval, error) {
	if depth > 64 {
		return nil, jerr("too deep")
	}
	if p.i >= len(p.b) {
		return nil, jerr("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		v := &jval{k: jObj, obj: map[string]*jval{}}
		p.ws()
		if p.lit("}") {
			return v, nil
		}
		for {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return nil, jerr("member name expected at %d", p.i)
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			if _, dup := v.obj[k]; dup {
				return nil, jerr("duplicate member %q", k)
			}
			p.ws()
			if !p.lit(":") {
				return nil, jerr(": expected at %d", p.i)
			}
			p.ws()
			m, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v.obj[k] = m
			v.keys = append(v.keys, k)
			p.ws()
			if p.lit(",") {
				continue
			}
			if p.lit("}") {
				return v, nil
			}
			return nil, jerr(", or } expected at %d", p.i)
		}
	case c == '[':
		p.i++
		v := &jval{k: jArr}
		p.ws()
		if p.lit("]") {
			return v, nil
		}
		for {
			p.ws()
			m, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v.arr = append(v.arr, m)
			p.ws()
			if p.lit(",") {
				continue
			}
			if p.lit("]") {
				return v, nil
			}
			return nil, jerr(", or ] expected at %d", p.i)
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &jval{k: jStr, s: s}, nil
	case p.lit("true"):
		return &jval{k: jBool, b: true}, nil
	case p.lit("false"):
		return &jval{k: jBool}, nil
	case p.lit("null"):
		return &jval{k: jNull}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, jerr("unexpected %q at %d", p.b[p.i], p.i)
}

func (p *parser) number() (*jval, error) {
	st := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, jerr("bad number at %d", st)
	}
	if p.lit(".") && digits() == 0 {
		return nil, jerr("bad number at %d", st)
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, jerr("bad number at %d", st)
		}
	}
	return &jval{k: jNum, num: string(p.b[st:p.i])}, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	var out []byte
	for {
		if p.i >= len(p.b) {
			return "", jerr("unterminated string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", jerr("control character in string")
		case c == '\\':
			p.i++
			if p.i >= len(p.b) {
				return "", jerr("unterminated escape")
			}
			e := p.b[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(p.b[p.i:])
				if !ok {
					return "", jerr("bad \\u escape")
				}
				p.i += 4
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 || !p.lit("\\u") {
						return "", jerr("unpaired surrogate")
					}
					r2, ok := hex4(p.b[p.i:])
					if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
						return "", jerr("unpaired surrogate")
					}
					p.i += 4
					r = utf16.DecodeRune(r, r2)
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", jerr("bad escape \\%c", e)
			}
		default:
			out = append(out, c)
			p.i++
		}
	}
}
