package protocol

// hashIndex maps the reflection guard's sketch hashes to the first
// posting of each hash's list and the list's length. It is open
// addressing with linear probing over a power-of-two table, hand-written
// in place of a map[uint64]uint32 for two reasons the guard's profile
// showed: an issue inserts up to 64 hashes, each a look-up and an assign
// in a Go map (two probe sequences; one here, through slot), and the keys
// need no hashing of their own: sketch hashes are outputs of a 64-bit
// finaliser (spec §7), uniform in their low bits, which pick the bucket.
// Deletion shifts the following entries back (no tombstones), so look-ups
// stay short however many entries expire. A bucket's key, first posting
// and length sit together, 16 bytes, so a probe reads one cache line: the
// table of a full guard is a few MiB (4 MiB for 8,192 procedural
// challenges, 102k distinct hashes; up to 16 MiB were every hash
// distinct), and an issue's 64 inserts are as many cache misses. Not
// safe for concurrent use (the guard's mutex covers it).
type hashIndex struct {
	b    []hashBucket
	n    int
	mask uint64
}

// hashBucket is one bucket: val is the first posting + 1 (0 marks an
// empty bucket), n the list's length.
type hashBucket struct {
	key    uint64
	val, n uint32
}

const hashIndexMinSize = 64

// list returns the first posting of h's list and the list's length.
func (x *hashIndex) list(h uint64) (first, n uint32, ok bool) {
	if x.n == 0 {
		return 0, 0, false
	}
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch b := &x.b[i]; {
		case b.val == 0:
			return 0, 0, false
		case b.key == h:
			return b.val - 1, b.n, true
		}
	}
}

// slot returns the bucket of h, inserting h with an empty list if it is
// absent (found false); add to it with push. It may grow the table,
// moving every bucket.
func (x *hashIndex) slot(h uint64) (i uint64, found bool) {
	if 4*(x.n+1) > 3*len(x.b) {
		x.grow()
	}
	for i = h & x.mask; ; i = (i + 1) & x.mask {
		switch b := &x.b[i]; {
		case b.val == 0:
			b.key, b.n = h, 0
			x.n++
			return i, false
		case b.key == h:
			return i, true
		}
	}
}

// touch reads the home bucket of each of hs, and returns something of
// them so that the reads are made: their addresses do not depend on one
// another, so the processor has many of their cache misses outstanding
// at once, where slot and list, which branch on what they read, wait for
// one miss at a time. Called before a run of slot or list over hs, it
// leaves most of their buckets in the cache: a full guard's table is
// several MiB, and an issue or a check probes it for 64 hashes.
func (x *hashIndex) touch(hs []uint64) uint64 {
	if len(x.b) == 0 {
		return 0
	}
	var sum uint64
	for _, h := range hs {
		sum += x.b[h&x.mask].key
	}
	return sum
}

// value is the first posting in bucket i (which slot returned, found).
func (x *hashIndex) value(i uint64) uint32 { return x.b[i].val - 1 }

// push makes v the first posting of the list in bucket i (from slot),
// one longer.
func (x *hashIndex) push(i uint64, v uint32) {
	x.b[i].val = v + 1
	x.b[i].n++
}

// drop takes the last posting off h's list, which must be present: the
// list is one shorter, and h is removed with its last posting.
func (x *hashIndex) drop(h uint64) {
	i := h & x.mask
	for x.b[i].key != h || x.b[i].val == 0 {
		i = (i + 1) & x.mask
	}
	if x.b[i].n--; x.b[i].n == 0 {
		x.delAt(i)
	}
}

// delAt empties bucket i, shifting back the entries after it whose home
// bucket allows.
func (x *hashIndex) delAt(i uint64) {
	x.n--
	for j := i; ; {
		x.b[i].val = 0
		for {
			j = (j + 1) & x.mask
			if x.b[j].val == 0 {
				return
			}
			// The entry at j may move to i when its home bucket does
			// not lie in the cyclic range (i, j].
			home := x.b[j].key & x.mask
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				break
			}
		}
		x.b[i] = x.b[j]
		i = j
	}
}

func (x *hashIndex) grow() {
	size := max(hashIndexMinSize, 2*len(x.b))
	old := x.b
	x.b, x.mask, x.n = make([]hashBucket, size), uint64(size-1), 0
	for _, b := range old {
		if b.val != 0 {
			j, _ := x.slot(b.key)
			x.b[j] = b
		}
	}
}

// len is the number of hashes held.
func (x *hashIndex) len() int { return x.n }
