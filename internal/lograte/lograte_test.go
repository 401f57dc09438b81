package lograte

import (
	"testing"
	"time"
)

// One key writes once per Every and the next line carries what was held
// back; fresh keys share a burst of Burst, then one line per Refill.
func TestLimiterPerKeyAndTotal(t *testing.T) {
	var l Limiter[int]
	now := time.Unix(10000, 0)
	if ok, _, _ := l.Allow(0, now); !ok {
		t.Fatal("first line held back")
	}
	for range 5 {
		if ok, _, _ := l.Allow(0, now.Add(time.Second)); ok {
			t.Fatal("a second line for the key within Every")
		}
	}
	ok, same, _ := l.Allow(0, now.Add(Every))
	if !ok || same != 5 {
		t.Fatalf("after Every: written %v, held back %d, want true, 5", ok, same)
	}
	written := 0
	for k := 1; k <= 1000; k++ { // fresh keys, all at one instant
		if ok, _, _ := l.Allow(k, now.Add(Every)); ok {
			written++
		}
	}
	if written != Burst-1 { // the key above took one token
		t.Fatalf("%d fresh keys written at once, want %d", written, Burst-1)
	}
	ok, _, other := l.Allow(5000, now.Add(Every+Refill))
	if !ok || other != 1000-(Burst-1) {
		t.Fatalf("one Refill later: written %v, others held back %d, want true, %d", ok, other, 1000-(Burst-1))
	}
	if n := l.Len(); n != Burst+1 {
		t.Fatalf("%d keys remembered, want %d", n, Burst+1)
	}
}
