package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Via names how a learned attestation reached this node.
type Via string

// Ways of learning an attestation from a third party.
const (
	// ViaGossip: delivered on the attestation GossipSub topic.
	ViaGossip Via = "gossip"
	// ViaPresentation: presented by its subject over the presentation
	// protocol (present.go).
	ViaPresentation Via = "presentation"
)

var (
	// bucketLearned holds attestations this node neither issued nor
	// received as the subject of a session: one entry per (subject,
	// issuer), the newest that reached us.
	bucketLearned = []byte("attestations/learned")
	// bucketRevoked holds the peers whose admission this node withdrew,
	// with the time of the revocation.
	bucketRevoked = []byte("admission/revoked")
)

// Learned is an attestation learned from a third party, with its
// provenance.
type Learned struct {
	Attestation *protocol.Attestation
	Envelope    []byte
	// Via says how it reached us; From is the peer that handed it to us
	// (the forwarder on gossip, the presenter for a presentation) and
	// Author the peer that published it on gossip (empty otherwise).
	Via       Via
	From      peer.ID
	Author    peer.ID
	LearnedAt time.Time
	// Net and Block are the network groups the record was counted in
	// when it was learned (the node's per-network share of learned
	// records; invalid: none), kept so that the share survives a
	// restart.
	Net, Block netip.Prefix
}

// learnedValue is the stored form of a Learned entry. The times and the
// verdict are copied out of the envelope so that superseding and pruning
// need no signature check; reading an entry back verifies the envelope.
type learnedValue struct {
	Version   int    `json:"v"`
	Via       Via    `json:"via"`
	From      string `json:"from,omitempty"`
	Author    string `json:"author,omitempty"`
	LearnedAt int64  `json:"learned_at"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
	Accepted  bool   `json:"accepted"`
	Envelope  []byte `json:"envelope"`
	Net       string `json:"net,omitempty"`
	Block     string `json:"block,omitempty"`
}

// learnedKey is uvarint(len(subject)) || subject || issuer: the entries of
// one subject sort together and the key is unambiguous although peer IDs
// are binary.
func learnedKey(subject, issuer peer.ID) []byte {
	k := binary.AppendUvarint(nil, uint64(len(subject)))
	k = append(k, subject...)
	return append(k, issuer...)
}

func learnedPrefix(subject peer.ID) []byte {
	if subject == "" {
		return nil
	}
	k := binary.AppendUvarint(nil, uint64(len(subject)))
	return append(k, subject...)
}

// Supersedes tells whether a record issued at (ia, ea) with verdict acc
// replaces one issued at (ib, eb) with verdict bcc by the same issuer about
// the same subject: the later issue time wins; at equal issue times a
// rejection beats an acceptance, then the later expiry wins. Identical
// records do not supersede each other. Times compare as the records' int64
// Unix seconds (spec/vectors/supersede.json): a time.Time made from a
// second above about 2^63 − 6.2·10^10 wraps, and After then misorders it,
// while Unix gives the second back.
func Supersedes(ia, ea time.Time, acc bool, ib, eb time.Time, bcc bool) bool {
	if a, b := ia.Unix(), ib.Unix(); a != b {
		return a > b
	}
	if acc != bcc {
		return !acc
	}
	return ea.Unix() > eb.Unix()
}

// SupersedesOwn is Supersedes for the records one node issued about one
// subject, which the store keeps all of (spec/trust.md §1): on a full tie
// (same issue time, verdict and expiry) the record whose challenge source
// ranks lower (skill.SourceKind.Rank) supersedes the other, so that the
// one that counts is the same whatever order the records are read in
// (a learned or received pair keeps one record: there the held one
// stays).
func SupersedesOwn(ia, ea time.Time, acc bool, sa skill.SourceKind, ib, eb time.Time, bcc bool, sb skill.SourceKind) bool {
	if Supersedes(ia, ea, acc, ib, eb, bcc) {
		return true
	}
	if Supersedes(ib, eb, bcc, ia, ea, acc) {
		return false
	}
	return sa.Rank() < sb.Rank()
}

// PutLearned stores learned attestations, each replacing the stored entry
// for the same issuer and subject only when it supersedes it (see
// Admission). All entries are written in one transaction.
func (s *Store) PutLearned(ls ...Learned) error {
	if len(ls) == 0 {
		return nil
	}
	err := s.update1(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketLearned)
		if err != nil {
			return err
		}
		for _, l := range ls {
			a := l.Attestation
			if a == nil || len(l.Envelope) == 0 {
				return fmt.Errorf("%w: learned entry without attestation or envelope", protocol.ErrMalformed)
			}
			k := learnedKey(a.Subject, a.Issuer)
			if old := b.Get(k); old != nil {
				var ov learnedValue
				if json.Unmarshal(old, &ov) == nil &&
					!Supersedes(a.IssuedAt, a.ExpiresAt, a.Accepted, time.Unix(ov.IssuedAt, 0), time.Unix(ov.ExpiresAt, 0), ov.Accepted) &&
					soundLearned(k, ov) {
					continue
				}
			}
			v := learnedValue{
				Version: 1, Via: l.Via, LearnedAt: l.LearnedAt.Unix(),
				IssuedAt: a.IssuedAt.Unix(), ExpiresAt: a.ExpiresAt.Unix(), Accepted: a.Accepted,
				Envelope: l.Envelope,
			}
			if l.From != "" {
				v.From = l.From.String()
			}
			if l.Author != "" {
				v.Author = l.Author.String()
			}
			if l.Net.IsValid() {
				v.Net = l.Net.String()
			}
			if l.Block.IsValid() {
				v.Block = l.Block.String()
			}
			data, err := json.Marshal(v)
			if err != nil {
				return err
			}
			if err := b.Put(k, data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store learned attestations: %w", err)
	}
	return nil
}

// soundLearned reports whether the stored learned value v at key k still
// verifies and is the record its copied times and verdict say. PutLearned
// keeps a stored record over an entry it supersedes only then: the node
// learns a record whose stored version is damaged in place (its index
// skipped it, trust.md §5), and a damaged value whose copied issue time
// is later kept the sound record out of the store for good (the pair was
// lost at the next start). The index learns such an entry only when it
// holds no sound newer version, so the check runs only when the two
// disagree.
func soundLearned(k []byte, v learnedValue) bool {
	a, err := verifyEnvelope(v.Envelope, protocol.VerifyOptions{AllowExpired: true})
	return err == nil && bytes.Equal(k, learnedKey(a.Subject, a.Issuer)) &&
		a.IssuedAt.Unix() == v.IssuedAt && a.ExpiresAt.Unix() == v.ExpiresAt && a.Accepted == v.Accepted
}

// ListLearned returns the learned attestations about subject (all when
// empty), verifying every envelope again. Expired entries are listed;
// entries that no longer verify (a damaged or tampered file) are skipped,
// and their number is returned as bad.
func (s *Store) ListLearned(subject peer.ID) (out []Learned, bad int, err error) {
	return s.listLearned(subject, func(env []byte) (*protocol.Attestation, error) {
		return verifyEnvelope(env, protocol.VerifyOptions{AllowExpired: true})
	})
}

// ListLearnedUnverified is ListLearned without the signature checks: every
// entry is decoded with all the checks of protocol.VerifyAttestation but
// the signature (protocol.DecodeAttestationUnverified), and entries that
// fail them are skipped and counted as bad. The entries it returns are
// NOT authenticated: the caller verifies each with VerifyLearned before
// it trusts it (the node's trust index checks them after start and on
// first use, spec/trust.md §5: a signature check costs ~50 µs and the
// store holds up to 131 072 learned records).
func (s *Store) ListLearnedUnverified(subject peer.ID) (out []Learned, bad int, err error) {
	return s.listLearned(subject, protocol.DecodeAttestationUnverified)
}

// VerifyLearned verifies the envelope of an entry ListLearnedUnverified
// returned: nil when its signature holds (the record is then the one the
// entry carries), an error wrapping a protocol sentinel otherwise.
func VerifyLearned(l Learned) error {
	a, err := verifyEnvelope(l.Envelope, protocol.VerifyOptions{AllowExpired: true})
	if err != nil {
		return fmt.Errorf("learned attestation does not verify: %w", err)
	}
	if l.Attestation == nil || a.Issuer != l.Attestation.Issuer || a.Subject != l.Attestation.Subject {
		return fmt.Errorf("learned attestation: %w: the envelope names another pair", protocol.ErrMalformed)
	}
	return nil
}

// listLearned decodes the learned entries about subject (all when empty)
// with decode, on GOMAXPROCS goroutines (a node reads up to 131 072 of
// them at start, ~20 µs each without the signature check), in key order.
func (s *Store) listLearned(subject peer.ID, decode func([]byte) (*protocol.Attestation, error)) (out []Learned, bad int, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLearned)
		if b == nil {
			return nil
		}
		// The keys and values stay valid until the transaction ends; every
		// decoded field is a copy.
		var kvs [][2][]byte
		prefix := learnedPrefix(subject)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			kvs = append(kvs, [2][]byte{k, v})
		}
		ls := make([]Learned, len(kvs))
		ok := make([]bool, len(kvs))
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(runtime.GOMAXPROCS(0), max(len(kvs)/256, 1)) {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(kvs) {
						return
					}
					ls[i], ok[i] = decodeLearned(kvs[i][0], kvs[i][1], decode)
				}
			})
		}
		wg.Wait()
		out = make([]Learned, 0, len(kvs))
		for i, l := range ls {
			if !ok[i] {
				bad++
				continue
			}
			out = append(out, l)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list learned attestations: %w", err)
	}
	return out, bad, nil
}

// decodeLearned decodes the learned entry stored as v at key k; false
// when it no longer decodes or names another pair than its key.
func decodeLearned(k, v []byte, decode func([]byte) (*protocol.Attestation, error)) (Learned, bool) {
	var lv learnedValue
	if err := json.Unmarshal(v, &lv); err != nil {
		return Learned{}, false
	}
	a, err := decode(lv.Envelope)
	if err != nil || !bytes.Equal(k, learnedKey(a.Subject, a.Issuer)) {
		return Learned{}, false
	}
	l := Learned{Attestation: a, Envelope: lv.Envelope, Via: lv.Via, LearnedAt: time.Unix(lv.LearnedAt, 0).UTC()}
	if lv.From != "" {
		l.From, _ = peer.Decode(lv.From)
	}
	if lv.Author != "" {
		l.Author, _ = peer.Decode(lv.Author)
	}
	if lv.Net != "" {
		l.Net, _ = netip.ParsePrefix(lv.Net)
	}
	if lv.Block != "" {
		l.Block, _ = netip.ParsePrefix(lv.Block)
	}
	return l, true
}

// LearnedDead reports whether a learned record (accepted or not, issued
// and expiring at the times given) is pruned at now: once it expired,
// and a rejection only once every acceptance it superseded expired too
// (with maxLifetime 0, at its own expiry). Those were issued before it,
// and a node keeps none valid for longer than maxLifetime, so
// issued_at + maxLifetime is past them all: pruned at its own expiry, a
// rejection shorter-lived than the acceptance it withdrew left the pair
// empty, and the subject presented the withdrawn acceptance, which was
// learned again and counted (spec/trust.md §3.6; audit-84). The node's
// memory and its store prune by it alike.
func LearnedDead(accepted bool, issued, expires, now time.Time, maxLifetime time.Duration) bool {
	if now.Before(expires) {
		return false
	}
	return accepted || maxLifetime <= 0 || !now.Before(issued.Add(maxLifetime))
}

// PruneLearned deletes the learned entries that expired at or before now
// (a rejection only once maxLifetime since its issue has passed too:
// every acceptance it superseded expired by then, and one presented
// again must find the pair held; with maxLifetime 0, at its expiry),
// and those valid for longer than maxLifetime (expires_at − issued_at;
// none when maxLifetime is 0), and returns how many it deleted. A node
// does not learn the latter (spec/trust.md §3.6), but one that read their
// lifetime wrongly did (an expires_at near 2^63, whose time.Time wraps);
// without this they were never deleted.
func (s *Store) PruneLearned(now time.Time, maxLifetime time.Duration) (int, error) {
	maxSecs := int64(maxLifetime / time.Second)
	n := 0
	err := s.update1(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLearned)
		if b == nil {
			return nil
		}
		var dead [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var lv learnedValue
			if json.Unmarshal(v, &lv) != nil || LearnedDead(lv.Accepted, time.Unix(lv.IssuedAt, 0), time.Unix(lv.ExpiresAt, 0), now, maxLifetime) ||
				(maxSecs > 0 && (lv.IssuedAt <= 0 || lv.ExpiresAt-lv.IssuedAt > maxSecs)) {
				dead = append(dead, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(dead)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune learned attestations: %w", err)
	}
	return n, nil
}

// PutRevocation records that this node withdrew its admission of p at
// time at (see Node.Revoke).
func (s *Store) PutRevocation(p peer.ID, at time.Time) error {
	if p == "" {
		return fmt.Errorf("record revocation: empty peer ID")
	}
	err := s.update1(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRevoked)
		if err != nil {
			return err
		}
		return b.Put([]byte(p), binary.BigEndian.AppendUint64(nil, uint64(at.Unix())))
	})
	if err != nil {
		return fmt.Errorf("record revocation of %s: %w", p, err)
	}
	return nil
}

// Revocations returns the revoked peers with the time of their revocation.
func (s *Store) Revocations() (map[peer.ID]time.Time, error) {
	out := map[peer.ID]time.Time{}
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRevoked)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			id, err := peer.IDFromBytes(k)
			if err != nil || len(v) != 8 {
				return nil // not ours: skip rather than fail the node
			}
			out[id] = time.Unix(int64(binary.BigEndian.Uint64(v)), 0).UTC()
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read revocations: %w", err)
	}
	return out, nil
}
