package procedural

import (
	"testing"
)

// BenchmarkGenerate measures three-part sets per second at the default
// lengths (run with -cpu 1 for the single-core figure).
func BenchmarkGenerate(b *testing.B) {
	g, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var seed uint64
	for b.Loop() {
		if _, err := g.Generate(seed); err != nil {
			b.Fatal(err)
		}
		seed++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
}
