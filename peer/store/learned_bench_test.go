package store

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// BenchmarkListLearnedUnverified reads a store of ACAPTCHA_BENCH_LEARNED
// (default 20 000) learned records of distinct issuers and subjects as
// the node's start does, without their signature checks (-cpu 1,2: the
// decoding runs on GOMAXPROCS goroutines); /verified is ListLearned,
// which checks every signature (what the start did before).
func BenchmarkListLearnedUnverified(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("ACAPTCHA_BENCH_LEARNED")); err == nil && v > 0 {
		n = v
	}
	s, err := Open(filepath.Join(b.TempDir(), "s.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	var ls []Learned
	for i := range n {
		key, _ := testutil.NewKey(b)
		_, subject := testutil.NewKey(b)
		env, a := sealed(b, key, subject, now, time.Hour)
		ls = append(ls, Learned{Attestation: a, Envelope: env, Via: ViaGossip, LearnedAt: now})
		if len(ls) == 4096 || i == n-1 {
			if err := s.PutLearned(ls...); err != nil {
				b.Fatal(err)
			}
			ls = ls[:0]
		}
	}
	for _, mode := range []string{"unverified", "verified"} {
		list := s.ListLearnedUnverified
		if mode == "verified" {
			list = s.ListLearned
		}
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				got, bad, err := list("")
				if err != nil || bad != 0 || len(got) != n {
					b.Fatalf("%d listed, %d bad, %v", len(got), bad, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/record")
		})
	}
}
