package skill

import (
	"bytes"
	"os"
	"testing"
)

// A set file is read as every JSON parser reads it alike (generation.md,
// "Format"): member names exactly as the schema spells them, no
// duplicate member, UTF-8 with no unpaired surrogate escape. encoding/json
// alone matches names case-insensitively (and by simple folding, `ſ` for
// `s`), keeps the last duplicate and turns bad bytes into U+FFFD.
func TestDecodeSetStrictJSON(t *testing.T) {
	data, err := os.ReadFile("../spec/examples/generated/aviation_maintenance.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeSet(data); err != nil {
		t.Fatalf("the example set: %v", err)
	}
	for _, c := range []struct{ name, old, new string }{
		{"member name in another case", `"answer":`, `"Answer":`},
		{"long s for s", `"questions":`, `"queſtions":`},
		{"duplicate member", `"domain":`, `"domain": "aviation_maintenance", "domain":`},
		{"invalid UTF-8", `"narrative": "`, "\"narrative\": \"\xff"},
		{"unpaired surrogate escape", `"narrative": "`, `"narrative": "\ud800`},
	} {
		if !bytes.Contains(data, []byte(c.old)) {
			t.Fatalf("%s: %q not in the example", c.name, c.old)
		}
		mut := bytes.Replace(data, []byte(c.old), []byte(c.new), 1)
		if _, err := DecodeSet(mut); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
}

// Nothing but JSON white space may follow the set's object
// (generation.md, "Format"): the decoder checked with dec.More, which
// reports false before a closing bracket or brace, so `{...}]` and
// `{...}}` were read as the set (FuzzInspectSet: a file a node loaded
// that challenge inspect refused as malformed).
func TestDecodeSetTrailingData(t *testing.T) {
	data, err := os.ReadFile("../spec/examples/generated/aviation_maintenance.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tail := range []string{" \n\t\r"} {
		if _, err := DecodeSet(append(bytes.Clone(data), tail...)); err != nil {
			t.Errorf("white space %q after the object: %v", tail, err)
		}
	}
	for _, tail := range []string{"]", "}", " ]]", "\n}}", "x", "{}", "[]", "null"} {
		if _, err := DecodeSet(append(bytes.Clone(data), tail...)); err == nil {
			t.Errorf("%q after the object: decoded", tail)
		}
	}
}
