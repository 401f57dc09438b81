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
