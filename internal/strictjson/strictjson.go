// Package strictjson refuses the JSON that parsers read differently
// (spec/http.md §1, spec/generation.md "Format").
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Check refuses what encoding/json would take silently: bytes that are
// not UTF-8, a \u escape of an unpaired surrogate, and an object with
// two members of the same name. When name is not nil it is called with
// every member name (encoding/json matches member names to struct fields
// case-insensitively, so a caller that wants exact names checks them
// there). Syntax errors are left to the decoder.
func Check(data []byte, name func(string) error) error {
	if !utf8.Valid(data) {
		return errors.New("not UTF-8")
	}
	if err := checkSurrogates(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	// One set of member names per open object; nil for an array.
	var open []map[string]bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				open = append(open, map[string]bool{})
				expectKey = true
				continue
			case '[':
				open = append(open, nil)
			default:
				open = open[:len(open)-1]
			}
		case string:
			if expectKey {
				names := open[len(open)-1]
				if names[t] {
					return fmt.Errorf("duplicate member %q", t)
				}
				if name != nil {
					if err := name(t); err != nil {
						return err
					}
				}
				names[t] = true
				expectKey = false
				continue
			}
		}
		// After a value: the next token is a key if in an object.
		expectKey = len(open) > 0 && open[len(open)-1] != nil
	}
}

// checkSurrogates reports a \u escape inside a JSON string that is an
// unpaired UTF-16 surrogate.
func checkSurrogates(data []byte) error {
	inString, pendingHigh := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			inString = c == '"'
			continue
		}
		unit := -1
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(data) && data[i+1] == 'u' && i+5 < len(data) {
				if u, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16); err == nil {
					unit = int(u)
				}
				i += 5
			} else {
				i++
			}
		}
		switch {
		case unit >= 0xDC00 && unit <= 0xDFFF:
			if !pendingHigh {
				return errors.New("unpaired surrogate escape in a string")
			}
			pendingHigh = false
		case pendingHigh:
			return errors.New("unpaired surrogate escape in a string")
		case unit >= 0xD800 && unit <= 0xDBFF:
			pendingHigh = true
		}
	}
	return nil
}
