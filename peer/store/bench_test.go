package store

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
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

// BenchmarkPutSized stores one attestation at a time (each Put returns
// after its synced log append) into a store that already holds 0, 10,000
// or 100,000 records of random subjects: a Put appends to the write-ahead
// log, and every walCheckpointRecords Puts a checkpoint commits them into
// bbolt, rewriting the pages on the paths to their leaves and the
// freelist, whose cost grows with the store (hence Store.PruneExpired).
// cpu-us/put is the process's user and system CPU per Put, the disk
// syncs' share included.
func BenchmarkPutSized(b *testing.B) {
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "s.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			env := make([]byte, 900) // about a signed acceptance
			subject := func() peer.ID {
				_, _ = rand.Read(env)
				return peer.ID(fmt.Sprintf("12D3KooW%x", env[:16]))
			}
			for i := 0; i < n; i += 1000 {
				err := s.db.Update(func(tx *bolt.Tx) error {
					for j := i; j < min(i+1000, n); j++ {
						if err := tx.Bucket(bucketIssued).Put(entryKey(subject(), time.Now(), env), bytes.Clone(env)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := testutil.ProcessCPU()
			b.ResetTimer()
			for range b.N {
				a := &protocol.Attestation{Issuer: "issuer", Subject: subject(), IssuedAt: time.Now(), Accepted: true}
				if err := s.Put(Issued, env, a); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/put")
		})
	}
}
