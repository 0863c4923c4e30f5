package localstore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/ratekit/ratelimit/strategy"
)

// live stores k with a state that matters until far in the future.
func live(s *Store[int64], k Key, now int64) {
	s.Do(k, now, func(v *int64) int64 { *v++; return now + 1e9 })
}

// A full Store evicts, never grows, and counts every eviction.
func TestBoundOnSubjects(t *testing.T) {
	for _, max := range []int{1, 3, 64, 1000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			var onEvict atomic.Int64
			s := NewStore[int64](Config{MaxSubjects: max, Sweep: time.Hour, OnEvict: func() { onEvict.Add(1) }})
			const inserted = 20000
			for i := range inserted {
				live(s, Key{fmt.Sprint("k", i), -1}, 0)
				if n := s.Len(); i%997 == 0 && n > max {
					t.Fatalf("after %d subjects: Len %d, above MaxSubjects %d", i+1, n, max)
				}
			}
			n := s.Len()
			if n > max || n < max*9/10 {
				t.Fatalf("Len = %d, want at most %d and nearly that", n, max)
			}
			if ev := s.Evicted(); ev != uint64(inserted-n) || onEvict.Load() != int64(ev) {
				t.Fatalf("Evicted = %d, OnEvict called %d times; want %d (every subject not held)", ev, onEvict.Load(), inserted-n)
			}
		})
	}
	if s := NewStore[int64](Config{}); s.MaxSubjects() != strategy.DefaultMaxSubjects {
		t.Fatalf("default MaxSubjects = %d, want %d", s.MaxSubjects(), strategy.DefaultMaxSubjects)
	}
}

// The subject evicted is the least recently used of its stripe, and an
// expired one goes first without counting as an eviction.
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	s := NewStore[int64](Config{MaxSubjects: 3 * maxStripes, Sweep: time.Hour})
	// subjects a, b, c... all in stripe 0
	var names []string
	for i := 0; len(names) < 9; i++ {
		if st, _ := s.hash(Key{fmt.Sprint("k", i), -1}); st == &s.stripes[0] {
			names = append(names, fmt.Sprint("k", i))
		}
	}
	st := &s.stripes[0]
	key := func(c byte) Key { return Key{names[c-'a'], -1} }
	put := func(c byte, now, expires int64) {
		s.Do(key(c), now, func(v *int64) int64 { *v++; return expires })
	}
	has := func(c byte) bool { _, h := s.hash(key(c)); return st.find(h, key(c)) != nil }
	put('a', 0, 100)
	put('b', 1, 100)
	put('c', 2, 100)
	put('a', 3, 100) // a is now the most recently used
	put('d', 4, 100) // evicts b
	if has('b') || !has('a') || !has('c') || !has('d') || st.n != 3 {
		t.Fatalf("after d: a %v b %v c %v d %v, n %d; want b evicted", has('a'), has('b'), has('c'), has('d'), st.n)
	}
	if s.Evicted() != 1 {
		t.Fatalf("Evicted = %d, want 1", s.Evicted())
	}
	if v, ok := s.Get(key('c'), 5); !ok || v != 1 { // Get counts as a use: c is now the newest
		t.Fatalf("Get(c) = %d, %v; want 1, true", v, ok)
	}
	put('e', 6, 100) // evicts a, the least recently used now
	if has('a') || !has('c') {
		t.Fatalf("after e: a %v c %v; want a evicted", has('a'), has('c'))
	}
	put('f', 7, 8) // expires at 8; evicts d, the oldest
	if has('d') || s.Evicted() != 3 {
		t.Fatalf("after f: d %v, Evicted %d; want d evicted, 3", has('d'), s.Evicted())
	}
	put('c', 8, 100)
	put('e', 8, 100) // f is the oldest, expired at 9
	put('g', 9, 100) // f dropped for free
	if has('f') || !has('c') || !has('e') || !has('g') || s.Evicted() != 3 {
		t.Fatalf("after g: f %v c %v e %v g %v, Evicted %d; want f dropped as expired, not counted",
			has('f'), has('c'), has('e'), has('g'), s.Evicted())
	}
}

// Idle subjects are freed by the stripes' timers with no further call,
// and the timers then stop.
func TestIdleFreedWithoutTraffic(t *testing.T) {
	var now atomic.Int64
	s := NewStore[int64](Config{Sweep: 10 * time.Millisecond, Now: now.Load})
	for i := range 5000 {
		s.Do(Key{fmt.Sprint("k", i), -1}, 0, func(v *int64) int64 { *v = 1; return 1000 })
	}
	if n := s.Len(); n != 5000 {
		t.Fatalf("Len = %d, want 5000", n)
	}
	now.Store(1000) // every state expired; no call to Do from here on
	waitFor(t, func() bool { return s.Len() == 0 }, "the store to empty by itself")
	waitFor(t, func() bool {
		for i := range s.stripes {
			st := &s.stripes[i]
			st.mu.Lock()
			armed := st.armed
			st.mu.Unlock()
			if armed {
				return false
			}
		}
		return true
	}, "every timer to stop")
}

// waitFor polls cond until it holds, failing after a minute: the sweeps
// run on timers, and the test asserts that they happen, not when.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// A dropped Store is collected even while its stripes' timers are pending
// and its subjects live: the timers hold it weakly.
func TestDroppedStoreIsCollected(t *testing.T) {
	w := func() weak.Pointer[Store[int64]] {
		s := NewStore[int64](Config{Sweep: time.Hour, Now: func() int64 { return 0 }})
		for i := range 1000 {
			live(s, Key{fmt.Sprint("k", i), -1}, 0)
		}
		return weak.Make(s)
	}()
	for i := 0; w.Value() != nil; i++ {
		if i == 20 {
			t.Fatal("the Store is still reachable after 20 collections: its timers hold it")
		}
		runtime.GC()
	}
}

// Stores holding subjects start no goroutine: their timers run only when
// they fire.
func TestNoGoroutinePerStore(t *testing.T) {
	before := runtime.NumGoroutine()
	stores := make([]*Store[int64], 200)
	for i := range stores {
		stores[i] = NewStore[int64](Config{Sweep: time.Hour, Now: func() int64 { return 0 }})
		for j := range 100 {
			live(stores[i], Key{fmt.Sprint("k", j), -1}, 0)
		}
	}
	if n := runtime.NumGoroutine() - before; n > 5 {
		t.Fatalf("200 stores of 100 subjects started %d goroutines, want none", n)
	}
	runtime.KeepAlive(stores)
}
