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
// stay short however many entries expire. Not safe for concurrent use
// (the guard's mutex covers it).
type hashIndex struct {
	keys []uint64
	vals []uint32 // posting + 1; 0 marks an empty bucket
	lens []uint32 // the list's length
	n    int
	mask uint64
}

const hashIndexMinSize = 64

// get returns the value of h.
func (x *hashIndex) get(h uint64) (uint32, bool) {
	if x.n == 0 {
		return 0, false
	}
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch v := x.vals[i]; {
		case v == 0:
			return 0, false
		case x.keys[i] == h:
			return v - 1, true
		}
	}
}

// list returns the first posting of h's list and the list's length.
func (x *hashIndex) list(h uint64) (first, n uint32, ok bool) {
	if x.n == 0 {
		return 0, 0, false
	}
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch v := x.vals[i]; {
		case v == 0:
			return 0, 0, false
		case x.keys[i] == h:
			return v - 1, x.lens[i], true
		}
	}
}

// slot returns the bucket of h, inserting h with an empty list if it is
// absent (found false); add to it with push. It may grow the table,
// moving every bucket.
func (x *hashIndex) slot(h uint64) (i uint64, found bool) {
	if 4*(x.n+1) > 3*len(x.vals) {
		x.grow()
	}
	for i = h & x.mask; ; i = (i + 1) & x.mask {
		switch v := x.vals[i]; {
		case v == 0:
			x.keys[i] = h
			x.lens[i] = 0
			x.n++
			return i, false
		case x.keys[i] == h:
			return i, true
		}
	}
}

// value is the first posting in bucket i (which slot returned, found).
func (x *hashIndex) value(i uint64) uint32 { return x.vals[i] - 1 }

// push makes v the first posting of the list in bucket i (from slot),
// one longer.
func (x *hashIndex) push(i uint64, v uint32) {
	x.vals[i] = v + 1
	x.lens[i]++
}

// drop takes one posting off h's list, which must be present: the list
// is one shorter, and h is removed with its last posting. When the
// posting was the first, next (another posting, or noPosting) is first
// now.
func (x *hashIndex) drop(h uint64, wasFirst bool, next uint32) {
	i := h & x.mask
	for x.keys[i] != h || x.vals[i] == 0 {
		i = (i + 1) & x.mask
	}
	if x.lens[i]--; x.lens[i] == 0 {
		x.delAt(i)
	} else if wasFirst {
		x.vals[i] = next + 1
	}
}

// set sets the first posting of h, which must be present, to v (tests).
func (x *hashIndex) set(h uint64, v uint32) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		if x.keys[i] == h && x.vals[i] != 0 {
			x.vals[i] = v + 1
			return
		}
	}
}

// del removes h, if present (tests).
func (x *hashIndex) del(h uint64) {
	if x.n == 0 {
		return
	}
	for i := h & x.mask; x.vals[i] != 0; i = (i + 1) & x.mask {
		if x.keys[i] == h {
			x.delAt(i)
			return
		}
	}
}

// delAt empties bucket i, shifting back the entries after it whose home
// bucket allows.
func (x *hashIndex) delAt(i uint64) {
	x.n--
	for j := i; ; {
		x.vals[i] = 0
		for {
			j = (j + 1) & x.mask
			if x.vals[j] == 0 {
				return
			}
			// The entry at j may move to i when its home bucket does
			// not lie in the cyclic range (i, j].
			home := x.keys[j] & x.mask
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				break
			}
		}
		x.keys[i], x.vals[i], x.lens[i] = x.keys[j], x.vals[j], x.lens[j]
		i = j
	}
}

func (x *hashIndex) grow() {
	size := max(hashIndexMinSize, 2*len(x.vals))
	keys, vals, lens := x.keys, x.vals, x.lens
	x.keys, x.vals, x.lens, x.mask, x.n = make([]uint64, size), make([]uint32, size), make([]uint32, size), uint64(size-1), 0
	for i, v := range vals {
		if v != 0 {
			j, _ := x.slot(keys[i])
			x.vals[j], x.lens[j] = v, lens[i]
		}
	}
}

// len is the number of hashes held.
func (x *hashIndex) len() int { return x.n }

// each calls f with every hash held (tests).
func (x *hashIndex) each(f func(h uint64)) {
	for i, v := range x.vals {
		if v != 0 {
			f(x.keys[i])
		}
	}
}
