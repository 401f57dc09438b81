package store

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// A log cut at any length (a file system that kept part of the last
// appends, or a copy cut short), or whose tail past the last frame is
// garbage, recovers exactly the frames wholly before the cut or the
// garbage, in order, without failing the open; the bbolt file is the one
// the crash left.
func TestWALCutAnywhere(t *testing.T) {
	key, _ := testutil.NewKey(t)
	s, path := openTemp(t)
	const n = 6
	envs, as := records(t, key, n)
	var ends []int64 // where each record's frame ends
	for i := range n {
		if err := s.Put(Issued, envs[i], as[i]); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, s.wal.off)
	}
	s.crash(t)
	db, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// Cut points: every frame boundary and one byte either side, the
	// header of the first frame, and a few bytes into the file.
	cuts := []int64{0, 1, 7, 8, 9}
	for _, e := range ends {
		cuts = append(cuts, e-1, e, e+1)
	}
	check := func(name string, walBytes []byte, want int) {
		t.Helper()
		if err := os.WriteFile(path, db, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+"-wal", walBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		defer s.Close()
		got := listed(t, s, Issued)
		if r := s.Recovered(); r.Records != want || len(got) != want {
			t.Fatalf("%s: recovered %+v, %d listed; want the %d whole frames", name, r, len(got), want)
		}
		for i := range want {
			if !got[string(envs[i])] {
				t.Fatalf("%s: record %d lost", name, i)
			}
		}
	}
	// whole counts the leading frames whose bytes walBytes holds as the
	// log wrote them, a file cut short read as if zeros followed (the
	// open preallocates with zeros): a frame cut one byte short whose
	// last byte was zero, or garbage that happens to equal it, is whole.
	whole := func(walBytes []byte) int {
		padded := make([]byte, max(len(log), len(walBytes)))
		copy(padded, walBytes)
		k := 0
		for _, e := range ends {
			if !bytes.Equal(padded[:e], log[:e]) {
				break
			}
			k++
		}
		return k
	}
	for _, c := range cuts {
		want := 0
		for _, e := range ends {
			if e <= c {
				want++
			}
		}
		cut := log[:c]
		check("cut at "+strconv.FormatInt(c, 10), cut, max(want, whole(cut)))
		// The same cut, garbage after it instead of zeros.
		g := append([]byte(nil), log...)
		for i := c; i < int64(len(g)) && i < c+4096; i++ {
			g[i] = byte(i*131 + 7)
		}
		check("garbage from "+strconv.FormatInt(c, 10), g, max(want, whole(g)))
	}
	// A log longer than its preallocated size: what lies past it is
	// never read.
	long := append(append([]byte(nil), log...), log[:ends[n-1]]...)
	check("longer", long, n)
}
