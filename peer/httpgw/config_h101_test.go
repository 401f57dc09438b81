package httpgw

import (
	"math"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestNewRefusesAbsurdRates (helper-101): a NaN request rate passed
// New's check (NaN < 0 is false) and the door then refused every request;
// an infinite one lifted the limit; a PowDifficulty below protocol.NoPow
// was read as none. Each is now an error naming the field.
func TestNewRefusesAbsurdRates(t *testing.T) {
	core := newFakeCore(t, nil, skill.DefaultPolicy())
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		field string
	}{
		{"NaN RequestRate", func(c *Config) { c.RequestRate = math.NaN() }, "RequestRate"},
		{"infinite RequestRate", func(c *Config) { c.RequestRate = math.Inf(1) }, "RequestRate"},
		{"NaN GlobalRequestRate", func(c *Config) { c.GlobalRequestRate = math.NaN() }, "GlobalRequestRate"},
		{"infinite GlobalRequestRate", func(c *Config) { c.GlobalRequestRate = math.Inf(1) }, "GlobalRequestRate"},
		{"PowDifficulty below NoPow", func(c *Config) { c.PowDifficulty = -7 }, "PowDifficulty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Core: core}
			tc.set(&cfg)
			g, err := New(cfg)
			if err == nil {
				g.Close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}
