package peer

import (
	"github.com/acaptcha/acaptcha/peer/store"
	"github.com/acaptcha/acaptcha/protocol"
)

// The node's database lives in package store; these names keep the node's
// API in one place for embedders.
type (
	// Store is the node's bbolt database (store.Store).
	Store = store.Store
	// Entry is one stored attestation.
	Entry = store.Entry
	// Direction tells whether this node issued an attestation or
	// received it.
	Direction = store.Direction
	// Learned is an attestation learned from a third party.
	Learned = store.Learned
	// Via names how a learned attestation reached this node.
	Via = store.Via
)

// Directions of stored attestations and ways of learning one.
const (
	Issued          = store.Issued
	Received        = store.Received
	ViaGossip       = store.ViaGossip
	ViaPresentation = store.ViaPresentation
)

// ErrStoreLocked is returned when another process holds the store.
var ErrStoreLocked = store.ErrLocked

// ErrNoAttestation is what Store.Get returns (wrapped) for a key the store
// does not hold.
var ErrNoAttestation = store.ErrNoEntry

// OpenStore opens or creates the store at path (store.Open) for a node:
// while sessions run, a record waits up to storeLinger for the next one
// so that both share a synced commit (Store.SetLinger). A node opening
// its StorePath and a program handing its node Config.Store (the CLI,
// which shares the store with its challenge pools) both open it here;
// before, only the former lingered.
func OpenStore(path string) (*Store, error) {
	s, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	s.SetLinger(storeLinger, func() bool { return protocol.RunningSessions() > 0 })
	return s, nil
}

// ErrStoreCorrupt is returned for a store file that is damaged;
// ErrNotStore for a file that is no acaptcha store (an empty file, or a
// bbolt file without the store's buckets), by a read-only open.
var ErrStoreCorrupt, ErrNotStore = store.ErrCorrupt, store.ErrNotStore

// OpenStoreReadOnly opens the existing store at path without writing to
// it: no file is created, no record or log is written (store.OpenWith).
func OpenStoreReadOnly(path string) (*Store, error) {
	return store.OpenWith(path, store.Options{ReadOnly: true})
}
