package eval

import (
	"math"
	"sort"
)

// Rate is a proportion K/N with its 95% Wilson score interval.
type Rate struct {
	K     int     `json:"k"`
	N     int     `json:"n"`
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// z95 is the two-sided 95% normal quantile.
const z95 = 1.959963984540054

// Wilson returns k/n with its 95% Wilson score interval. With n = 0 every
// field is zero (the rate is undefined; N says so).
func Wilson(k, n int) Rate {
	if n <= 0 || k < 0 || k > n {
		return Rate{K: max(k, 0), N: max(n, 0)}
	}
	p := float64(k) / float64(n)
	nn := float64(n)
	z2 := z95 * z95
	den := 1 + z2/nn
	centre := (p + z2/(2*nn)) / den
	half := z95 * math.Sqrt(p*(1-p)/nn+z2/(4*nn*nn)) / den
	return Rate{K: k, N: n, Value: p, Low: math.Max(0, centre-half), High: math.Min(1, centre+half)}
}

// quantile returns the q-quantile of sorted xs by linear interpolation (0
// when xs is empty).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	if q <= 0 {
		return sorted[0]
	}
	if q >= 1 {
		return sorted[len(sorted)-1]
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[i]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

func sortedCopy(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

// fractionAtMost returns the fraction of sorted xs that are <= t.
func fractionAtMost(sorted []float64, t float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sort.Search(len(sorted), func(i int) bool { return sorted[i] > t })) / float64(len(sorted))
}

// LogGrid returns n points from lo to hi evenly spaced on a log scale
// (n >= 2, 0 < lo < hi); anything else gives nil.
func LogGrid(lo, hi float64, n int) []float64 {
	if n < 2 || !(lo > 0) || !(hi > lo) || math.IsInf(hi, 0) {
		return nil
	}
	out := make([]float64, n)
	a, b := math.Log10(lo), math.Log10(hi)
	for i := range out {
		out[i] = math.Pow(10, a+(b-a)*float64(i)/float64(n-1))
	}
	out[0], out[n-1] = lo, hi
	return out
}

// Summary is a distribution summary in seconds.
type Summary struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	P05    float64 `json:"p05"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P95    float64 `json:"p95"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

func summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := sortedCopy(xs)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Summary{N: len(s), Min: s[0], P05: quantile(s, 0.05), Median: quantile(s, 0.5), P90: quantile(s, 0.9),
		P95: quantile(s, 0.95), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}
