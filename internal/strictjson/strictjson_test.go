package strictjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// strings collects every string (member names included) of v.
func collect(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []any:
		for _, e := range x {
			collect(e, out)
		}
	case map[string]any:
		for k, e := range x {
			*out = append(*out, k)
			collect(e, out)
		}
	}
}

// countMembers counts the members of every object in data, as the
// tokens name them (duplicates included).
func countMembers(data []byte) (members, distinct int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj   bool
		names map[string]bool
		key   bool
	}
	var open []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return members, distinct, err.Error() == "EOF"
		}
		var top *frame
		if len(open) > 0 {
			top = open[len(open)-1]
		}
		if s, isStr := tok.(string); isStr && top != nil && top.obj && top.key {
			members++
			if !top.names[s] {
				distinct++
				top.names[s] = true
			}
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, &frame{obj: true, names: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			open = append(open, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			open = open[:len(open)-1]
		}
		if len(open) > 0 && open[len(open)-1].obj {
			open[len(open)-1].key = true
		}
	}
}

// FuzzCheck: what Check passes, encoding/json reads as it is written:
// no U+FFFD that the text did not spell (a lone surrogate escape turned
// into one), no member of an object dropped as a duplicate; and every
// member name goes to the callback.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[{"a":2}],"c":"\ud83d\ude00"}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`"\ud800"`))
	f.Add([]byte(`"\\ud800"`))
	f.Add([]byte(`["\udc00\ud800"]`))
	f.Add([]byte(`{"x":{"y":{}},"y":"\ufffd"}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var names []string
		err := Check(data, func(n string) error { names = append(names, n); return nil })
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			return // a syntax error: the decoder's to report
		}
		var all []string
		collect(v, &all)
		spelled := bytes.Contains(data, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`))
		for _, s := range all {
			if strings.ContainsRune(s, '\uFFFD') && !spelled {
				t.Fatalf("Check passed %q, which decodes to a replacement character", data)
			}
		}
		members, distinct, ok := countMembers(data)
		if ok && members != distinct {
			t.Fatalf("Check passed %q with a duplicate member", data)
		}
		if ok && len(names) != members {
			t.Fatalf("the callback saw %d member names of %d", len(names), members)
		}
	})
}
