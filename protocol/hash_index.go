package protocol

// hashIndex maps the reflection guard's indexed sketch hashes to the
// first posting of each hash's list. It is open addressing with linear
// probing over a power-of-two table, hand-written in place of a
// map[uint64]uint32 for two reasons the guard's profile showed: an issue
// inserts 33 hashes, each a look-up and an assign in a Go map (two probe
// sequences; one here, through slot), and the keys need no hashing of
// their own: sketch hashes are outputs of a 64-bit finaliser (spec §7),
// uniform in their low bits, which pick the bucket. Deletion shifts the
// following entries back (no tombstones), so look-ups stay short however
// many entries expire. Not safe for concurrent use (the guard's mutex
// covers it).
type hashIndex struct {
	keys []uint64
	vals []uint32 // posting + 1; 0 marks an empty bucket
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

// slot returns the bucket of h, inserting h if it is absent (found
// false); set it with put. It may grow the table, moving every bucket.
func (x *hashIndex) slot(h uint64) (i uint64, found bool) {
	if 4*(x.n+1) > 3*len(x.vals) {
		x.grow()
	}
	for i = h & x.mask; ; i = (i + 1) & x.mask {
		switch v := x.vals[i]; {
		case v == 0:
			x.keys[i] = h
			x.n++
			return i, false
		case x.keys[i] == h:
			return i, true
		}
	}
}

// value is the value in bucket i (which slot returned, found).
func (x *hashIndex) value(i uint64) uint32 { return x.vals[i] - 1 }

// put sets the value in bucket i (from slot) to v.
func (x *hashIndex) put(i uint64, v uint32) { x.vals[i] = v + 1 }

// set sets the value of h, which must be present, to v.
func (x *hashIndex) set(h uint64, v uint32) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		if x.keys[i] == h && x.vals[i] != 0 {
			x.vals[i] = v + 1
			return
		}
	}
}

// del removes h, if present, shifting back the entries after it whose
// home bucket allows.
func (x *hashIndex) del(h uint64) {
	if x.n == 0 {
		return
	}
	i := h & x.mask
	for ; ; i = (i + 1) & x.mask {
		if x.vals[i] == 0 {
			return
		}
		if x.keys[i] == h {
			break
		}
	}
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
		x.keys[i], x.vals[i] = x.keys[j], x.vals[j]
		i = j
	}
}

func (x *hashIndex) grow() {
	size := max(hashIndexMinSize, 2*len(x.vals))
	keys, vals := x.keys, x.vals
	x.keys, x.vals, x.mask, x.n = make([]uint64, size), make([]uint32, size), uint64(size-1), 0
	for i, v := range vals {
		if v != 0 {
			j, _ := x.slot(keys[i])
			x.vals[j] = v
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
