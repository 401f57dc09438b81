package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPeersEndpointRendersBounded: every GET /peers of the operations
// port rendered the whole trust index (up to 65,536 learned records and
// their peers: tens of MB of JSON, the trust lock held meanwhile), as
// many at once as clients asked. The report is rendered once at a time
// and served from memory for opsPeersTTL.
func TestPeersEndpointRendersBounded(t *testing.T) {
	var renders, inRender, maxInRender atomic.Int64
	h := newPeersEndpoint(func() any {
		v := inRender.Add(1)
		defer inRender.Add(-1)
		for {
			m := maxInRender.Load()
			if v <= m || maxInRender.CompareAndSwap(m, v) {
				break
			}
		}
		renders.Add(1)
		time.Sleep(50 * time.Millisecond)
		return map[string]int{"peers": 1}
	}, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func() int {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Error(err)
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	const concurrent = 16
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range concurrent {
		wg.Go(func() {
			if get() == http.StatusOK {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	for range 20 {
		if get() == http.StatusOK {
			ok.Add(1)
		}
	}
	t.Logf("%d GETs (%d at once, 20 in a row), %d served: %d renders, %d at once at most", concurrent+20, concurrent, ok.Load(), renders.Load(), maxInRender.Load())
	if ok.Load() != concurrent+20 {
		t.Errorf("%d of %d GETs served, want all (from the cached report)", ok.Load(), concurrent+20)
	}
	if renders.Load() > 2 || maxInRender.Load() > 1 {
		t.Fatalf("%d renders, %d at once, for %d GETs within the cache's life: want 1 or 2, one at a time", renders.Load(), maxInRender.Load(), concurrent+20)
	}
}
