package store

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/protocol"
)

// BenchmarkPutConcurrent stores attestations from concurrent sessions
// (each Put returns after its commit was synced), as a node that attests
// several peers at once does; "solo" commits each record in a transaction
// of its own (DB.Update), as Put did before its writes were batched.
func BenchmarkPutConcurrent(b *testing.B) {
	for _, mode := range []string{"batched", "solo"} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) { benchPut(b, mode == "solo", writers) })
		}
	}
}

func benchPut(b *testing.B, solo bool, writers int) {
	s, err := Open(filepath.Join(b.TempDir(), "s.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	envs := make([][]byte, b.N)
	for i := range envs {
		envs[i] = make([]byte, 600) // about a signed attestation
		_, _ = rand.Read(envs[i])
	}
	put := s.Put
	if solo {
		put = func(_ Direction, env []byte, a *protocol.Attestation) error {
			return s.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketIssued).Put(entryKey(a.Subject, a.IssuedAt, env), env)
			})
		}
	}
	now := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				a := &protocol.Attestation{Issuer: "issuer", Subject: "subject", IssuedAt: now, Accepted: true}
				if err := put(Issued, envs[i], a); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
}
