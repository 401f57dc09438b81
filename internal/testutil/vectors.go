package testutil

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// VectorEnvelopes returns every envelope_hex of the spec's attestation
// vectors (spec/vectors/attestation.json), valid and negative cases
// alike, decoded: seeds for the fuzz targets of the decoders a record
// reaches (gossip, presentations, the doors' verify routes).
func VectorEnvelopes(t testing.TB) [][]byte {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testutil: no caller")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "spec", "vectors", "attestation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && k == "envelope_hex" {
					b, err := hex.DecodeString(s)
					if err != nil {
						t.Fatalf("envelope_hex: %v", err)
					}
					out = append(out, b)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	if len(out) == 0 {
		t.Fatal("testutil: no envelope in spec/vectors/attestation.json")
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}
