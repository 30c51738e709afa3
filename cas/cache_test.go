package cas

import (
	"fmt"
	"sync"
	"testing"
)

func obj(i, size int) (Hash, []byte) {
	b := make([]byte, size)
	copy(b, fmt.Sprint(i))
	return Sum(b), b
}

func TestCacheLRU(t *testing.T) {
	const size = 1000
	c := newCache(4 * cost(make([]byte, size)))
	var hs []Hash
	for i := range 4 {
		h, b := obj(i, size)
		hs = append(hs, h)
		c.add(h, b, c.currentEpoch())
	}
	if n, _ := c.size(); n != 4 {
		t.Fatalf("%d cached, want 4", n)
	}
	c.get(hs[0]) // 0 becomes the most recently used; 1 is now the oldest
	h4, b4 := obj(4, size)
	c.add(h4, b4, c.currentEpoch())
	if c.contains(hs[1]) {
		t.Fatal("least recently used object was not evicted")
	}
	for _, h := range []Hash{hs[0], hs[2], hs[3], h4} {
		if _, ok := c.get(h); !ok {
			t.Fatalf("%s evicted, want kept", h.Short())
		}
	}
	if n, used := c.size(); n != 4 || used != 4*cost(b4) {
		t.Fatalf("size = %d, %d bytes", n, used)
	}
}

func TestCacheBounds(t *testing.T) {
	c := newCache(10 << 10)
	h, big := obj(0, 3<<10) // more than a quarter: not cached
	c.add(h, big, c.currentEpoch())
	if c.contains(h) {
		t.Fatal("object above a quarter of the cache was cached")
	}
	for i := range 1000 {
		h, b := obj(i, i%2000)
		c.add(h, b, c.currentEpoch())
		if _, used := c.size(); used > c.max {
			t.Fatalf("used %d > max %d", used, c.max)
		}
	}
	z := newCache(0)
	h, b := obj(1, 0)
	z.add(h, b, z.currentEpoch())
	if z.contains(h) {
		t.Fatal("a zero-size cache cached")
	}
}

func TestCacheRemoveFencesStaleAdd(t *testing.T) {
	c := newCache(1 << 20)
	h, b := obj(0, 10)
	epoch := c.currentEpoch() // a reader starts...
	c.remove([]Hash{h})       // ...the object is deleted meanwhile...
	c.add(h, b, epoch)        // ...and the reader's result must not be cached.
	if c.contains(h) {
		t.Fatal("stale read re-cached a deleted object")
	}
	c.add(h, b, c.currentEpoch())
	c.remove([]Hash{h})
	if c.contains(h) {
		t.Fatal("remove kept the object")
	}
	if n, used := c.size(); n != 0 || used != 0 {
		t.Fatalf("size after remove = %d, %d", n, used)
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := newCache(64 << 10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				h, b := obj((g*7+i)%300, 500)
				switch i % 5 {
				case 0:
					c.remove([]Hash{h})
				case 1:
					c.contains(h)
				default:
					if got, ok := c.get(h); ok && Sum(got) != h {
						t.Error("cache returned the wrong object")
						return
					}
					c.add(h, b, c.currentEpoch())
				}
			}
		})
	}
	wg.Wait()
	if _, used := c.size(); used > c.max {
		t.Fatalf("used %d > max %d", used, c.max)
	}
}
