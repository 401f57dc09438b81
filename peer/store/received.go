package store

import (
	"bytes"
	"container/heap"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/protocol"
)

// The received attestations: what verifiers said about this node.
//
// A verifier picks when to send a verdict (right after the hello ack, with
// no challenge at all), so without a bound a hostile one could make the
// node store dozens of records an hour per peer ID, thousands in total,
// each kept for up to 60 days (a record's lifetime, capped by the peer
// package's MaxKeptLifetime, plus its KeepExpired) and each verified again
// at every start. So:
//
//   - One record per issuer and subject (putReceived): a record replaces
//     the stored records of its issuer about the same subject that it
//     supersedes (Supersedes: the later issue time wins, then a rejection,
//     then the later expiry), and is not stored when one of them
//     supersedes it or equals it in rank. The newest verdict of an issuer
//     is its current opinion of this node, and it is the one record of
//     that issuer the node indexes, presents and falls back on: the
//     trust index keeps the newest record per issuer and presents it only
//     when it is a valid acceptance, and it is rebuilt from the store at
//     start the same way. An older acceptance kept beside a newer
//     rejection would never be presented (the issuer withdrew it), so
//     keeping the newest acceptance and the newest rejection would keep
//     records nothing reads. Like the coalescing of issued rejections, it
//     happens when the record reaches bbolt, in the checkpoint's
//     transaction: the log (wal.go) holds every acknowledged record until
//     then, and replaying it after a crash gives the same result.
//
//   - At most MaxReceived records in total: fresh issuer IDs cost a
//     verifier nothing. A checkpoint that leaves more trims them in its
//     own transaction to MaxReceived - MaxReceived/16 (a trim scans the
//     bucket, so it runs once per MaxReceived/16 new issuers, not per
//     record). It evicts expired records first (the earliest expiry
//     first), then the oldest of issuers this node does not vouch for,
//     then the oldest. An issuer is vouched for when this node's newest
//     issued attestation of it is an unexpired acceptance: the store's
//     view of direct admission (without revocations or the source
//     policy), so Sybil issuers this node never verified cannot push out
//     the records of peers it did.

// MaxReceived bounds the received attestations the store keeps (one per
// issuer; see above). It is the same as the bound on the records about
// the node it holds in memory (peer.MaxSelfRecords).
const MaxReceived = 4096

// receivedSlack is how far under its bound a trim leaves the received
// records.
func receivedSlack(max int) int { return max / 16 }

// supersedesAtt tells whether a supersedes b (Supersedes).
func supersedesAtt(a, b *protocol.Attestation) bool {
	return Supersedes(a.IssuedAt, a.ExpiresAt, a.Accepted, b.IssuedAt, b.ExpiresAt, b.Accepted)
}

// putReceived puts the received record env (about a.Subject, by a.Issuer)
// under key k unless a stored record of the same issuer and subject
// supersedes it or ranks equal with it, and deletes the stored records of
// that issuer and subject it supersedes (any record a supersedes is also
// superseded by whichever record is kept). It decodes them without a
// signature check (decodeStored), and returns how the number of received
// records changed. Run again, it finds its record stored and changes
// nothing.
func putReceived(tx *bolt.Tx, k, env []byte, a *protocol.Attestation) (int, error) {
	prefix := append([]byte(a.Issuer), 0)
	b := tx.Bucket(bucketReceived)
	var dead [][]byte
	keep := true
	c := b.Cursor()
	for kk, v := c.Seek(prefix); kk != nil && bytes.HasPrefix(kk, prefix); kk, v = c.Next() {
		if bytes.Equal(kk, k) {
			keep = false // stored already
			continue
		}
		old, ok := decodeStored(v)
		if !ok || old.Issuer != a.Issuer || old.Subject != a.Subject {
			continue
		}
		if supersedesAtt(a, old) {
			dead = append(dead, bytes.Clone(kk))
		} else {
			keep = false
		}
	}
	for _, kk := range dead {
		if err := b.Delete(kk); err != nil {
			return 0, err
		}
	}
	delta := -len(dead)
	if keep {
		if err := b.Put(k, env); err != nil {
			return 0, err
		}
		delta++
	}
	return delta, nil
}

// applyRecords writes the record sets into bbolt and starts the log's
// generation next in one synced transaction, trimming the received records
// to their bound when they exceed it (see above).
func (s *Store) applyRecords(next uint64, sets ...[]*walRecord) error {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	n := s.nReceived
	err := s.update1(func(tx *bolt.Tx) error {
		n = s.nReceived
		for _, rs := range sets {
			for _, r := range rs {
				d, err := r.apply(tx)
				if err != nil {
					return fmt.Errorf("store attestation: %w", err)
				}
				n += d
			}
		}
		if n > s.maxReceived {
			left, err := trimReceived(tx, s.maxReceived-receivedSlack(s.maxReceived), time.Now())
			if err != nil {
				return fmt.Errorf("trim received attestations: %w", err)
			}
			n = left
		}
		return putWALGeneration(tx, next)
	})
	if err == nil {
		s.nReceived = n
	}
	return err
}

// deleteKeys deletes keys of bucket b in one transaction and returns how
// many were there.
func (s *Store) deleteKeys(b []byte, keys [][]byte) (int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	n := 0
	err := s.update1(func(tx *bolt.Tx) error {
		n = 0
		bk := tx.Bucket(b)
		for _, k := range keys {
			if bk.Get(k) == nil {
				continue
			}
			if err := bk.Delete(k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if bytes.Equal(b, bucketReceived) {
		s.nReceived -= n
	}
	return n, nil
}

// openReceived counts the received records at open and, when they exceed
// the bound (a store written before there was one), trims them in
// transactions of at most pruneBatch deletions: a crash between two leaves
// a store the next open trims again.
func (s *Store) openReceived(now time.Time) error {
	count := func() error {
		return s.view(func(tx *bolt.Tx) error {
			s.nReceived = tx.Bucket(bucketReceived).Stats().KeyN
			return nil
		})
	}
	if err := count(); err != nil || s.nReceived <= s.maxReceived {
		return err
	}
	var keep map[string]bool
	err := s.view(func(tx *bolt.Tx) error {
		keep, _ = receivedKeep(tx, s.maxReceived-receivedSlack(s.maxReceived), now)
		return nil
	})
	if err != nil {
		return fmt.Errorf("trim received attestations: %w", err)
	}
	for after := []byte(nil); ; {
		var dead [][]byte
		var next []byte
		err := s.view(func(tx *bolt.Tx) error {
			dead, next = receivedDrop(tx, keep, after, pruneBatch)
			return nil
		})
		if err == nil && len(dead) > 0 {
			_, err = s.deleteKeys(bucketReceived, dead)
		}
		if err != nil {
			return fmt.Errorf("trim received attestations: %w", err)
		}
		if next == nil {
			break
		}
		after = next
	}
	return count()
}

// trimReceived leaves at most target decodable received records in tx
// (see receivedKeep) and returns how many records the bucket holds after.
func trimReceived(tx *bolt.Tx, target int, now time.Time) (int, error) {
	keep, total := receivedKeep(tx, target, now)
	dead, _ := receivedDrop(tx, keep, nil, 0)
	b := tx.Bucket(bucketReceived)
	for _, k := range dead {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return total - len(dead), nil
}

// receivedCand is a received record competing for a place in the store.
type receivedCand struct {
	key                 []byte
	issuer              peer.ID
	issuedAt, expiresAt time.Time
	accepted            bool
	// class orders the eviction (0 first: expired; 1: issuer not vouched
	// for; 2: vouched for), at within it (the expiry for class 0, the
	// issue time otherwise; earliest first).
	class int
	at    time.Time
}

func (c *receivedCand) supersedes(o *receivedCand) bool {
	return Supersedes(c.issuedAt, c.expiresAt, c.accepted, o.issuedAt, o.expiresAt, o.accepted)
}

// evictsBefore tells whether c goes before o when records are evicted.
func (c *receivedCand) evictsBefore(o *receivedCand) bool {
	if c.class != o.class {
		return c.class < o.class
	}
	if !c.at.Equal(o.at) {
		return c.at.Before(o.at)
	}
	return bytes.Compare(c.key, o.key) < 0
}

// keepHeap holds the records kept so far, the first to evict on top.
type keepHeap []*receivedCand

func (h keepHeap) Len() int           { return len(h) }
func (h keepHeap) Less(i, j int) bool { return h[i].evictsBefore(h[j]) }
func (h keepHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keepHeap) Push(x any)        { *h = append(*h, x.(*receivedCand)) }
func (h *keepHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// receivedKeep picks the received records to keep: of each issuer and
// subject the record that supersedes the others, and of those at most
// target, evicting in the order above. It returns their keys, with those
// of records that do not decode (left for List to report, as
// PruneExpired leaves them), and how many keys the bucket holds. Its
// memory is bounded by target and by the records of one issuer: the keys
// of an issuer's records sort together.
func receivedKeep(tx *bolt.Tx, target int, now time.Time) (map[string]bool, int) {
	keep := map[string]bool{}
	var h keepHeap
	var issuer peer.ID
	winners := map[peer.ID]*receivedCand{} // subject -> record of issuer
	flush := func() {
		for _, w := range winners {
			switch {
			case !now.Before(w.expiresAt):
				w.class, w.at = 0, w.expiresAt
			case vouched(tx, w.issuer, now):
				w.class, w.at = 2, w.issuedAt
			default:
				w.class, w.at = 1, w.issuedAt
			}
			heap.Push(&h, w)
			if h.Len() > target {
				heap.Pop(&h)
			}
		}
		clear(winners)
	}
	total := 0
	c := tx.Bucket(bucketReceived).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		total++
		a, ok := decodeStored(v)
		if !ok {
			keep[string(k)] = true
			continue
		}
		if a.Issuer != issuer {
			flush()
			issuer = a.Issuer
		}
		r := &receivedCand{key: bytes.Clone(k), issuer: a.Issuer, issuedAt: a.IssuedAt, expiresAt: a.ExpiresAt, accepted: a.Accepted}
		if w := winners[a.Subject]; w == nil || r.supersedes(w) {
			winners[a.Subject] = r
		}
	}
	flush()
	for _, r := range h {
		keep[string(r.key)] = true
	}
	return keep, total
}

// receivedDrop returns the keys of received records not in keep, from
// the first key after after (nil: from the start), at most max of them
// (0: all). next is the last key returned when it stopped at max, nil when
// it reached the end.
func receivedDrop(tx *bolt.Tx, keep map[string]bool, after []byte, max int) (dead [][]byte, next []byte) {
	c := tx.Bucket(bucketReceived).Cursor()
	k, _ := c.First()
	if after != nil {
		if k, _ = c.Seek(after); k != nil && bytes.Equal(k, after) {
			k, _ = c.Next()
		}
	}
	for ; k != nil; k, _ = c.Next() {
		if keep[string(k)] {
			continue
		}
		dead = append(dead, bytes.Clone(k))
		if max > 0 && len(dead) == max {
			return dead, bytes.Clone(k)
		}
	}
	return dead, nil
}

// vouched reports whether this node's newest issued attestation of p is
// an unexpired acceptance. The keys of p's issued records sort by issue
// second: it reads back from the last until the second changes.
func vouched(tx *bolt.Tx, p peer.ID, now time.Time) bool {
	prefix := append([]byte(p), 0)
	c := tx.Bucket(bucketIssued).Cursor()
	var k, v []byte
	if k, _ = c.Seek(append([]byte(p), 1)); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	var best *protocol.Attestation
	var second []byte
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
		if len(k) != len(prefix)+16 {
			continue // another peer's key that starts like p's
		}
		sec := k[len(prefix) : len(prefix)+8]
		if best != nil && !bytes.Equal(sec, second) {
			break
		}
		a, ok := decodeStored(v)
		if !ok || a.Subject != p {
			continue
		}
		if best == nil || supersedesAtt(a, best) {
			best, second = a, bytes.Clone(sec)
		}
	}
	return best != nil && best.Accepted && now.Before(best.ExpiresAt)
}
