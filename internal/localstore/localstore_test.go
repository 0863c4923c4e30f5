package localstore

import (
	"fmt"
	"testing"
)

// Keys whose hashes collide share one chain; each keeps its own state,
// expires on its own and is deleted alone, wherever it sits in the chain.
func TestCollidingKeys(t *testing.T) {
	s := New[int64](1000)
	st := &s.stripes[0]
	const h = 42 // every key below has this hash
	keys := []Key{{"a", -1}, {"b", -1}, {"a", 0}, {"c", 3}}
	add := func(k Key, now, n, expires int64) int64 {
		var got int64
		s.do(st, h, k, now, func(v *int64) int64 {
			*v += n
			got = *v
			return expires
		})
		return got
	}
	for round := int64(1); round <= 3; round++ {
		for i, k := range keys {
			if got := add(k, 0, int64(i+1), 100); got != round*int64(i+1) {
				t.Fatalf("round %d, %v: state %d, want %d", round, k, got, round*int64(i+1))
			}
		}
	}
	if n := s.Len(); n != len(keys) {
		t.Fatalf("Len = %d, want %d", n, len(keys))
	}
	// delete from the middle of the chain, then its head and tail
	for _, k := range []Key{keys[1], keys[3], keys[0]} {
		st.delete(h, k)
		if got := add(k, 0, 0, 100); got != 0 {
			t.Fatalf("%v after delete: state %d, want 0", k, got)
		}
		st.delete(h, k)
	}
	if got := add(keys[2], 0, 0, 100); got != 3*3 {
		t.Fatalf("%v, never deleted: state %d, want 9", keys[2], got)
	}
	// one key expires on its own: fn's expiry, then the sweep
	add(keys[0], 0, 5, 10)
	if got := add(keys[0], 10, 0, 20); got != 0 {
		t.Fatalf("%v at its expiry: state %d, want a fresh 0", keys[0], got)
	}
	if got := add(keys[2], 10, 0, 100); got != 9 {
		t.Fatalf("%v beside an expired key: state %d, want 9", keys[2], got)
	}
	add(keys[0], 10, 1, 11)
	s.do(st, h, Key{"other", -1}, 5000, func(*int64) int64 { return 0 }) // sweeps the stripe
	if n := s.Len(); n != 0 {
		t.Fatalf("Len after the sweep = %d, want 0", n)
	}
}

// A state whose fn says it no longer matters is not stored.
func TestDroppedWhenExpired(t *testing.T) {
	s := New[int64](1000)
	for i := range 100 {
		s.Do(Key{fmt.Sprint("k", i), -1}, 50, func(v *int64) int64 { *v = 1; return 50 })
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len = %d, want 0", n)
	}
	for i := range 100 {
		s.Do(Key{fmt.Sprint("k", i), i % 3}, 50, func(v *int64) int64 { *v = 1; return 51 })
	}
	if n := s.Len(); n != 100 {
		t.Fatalf("Len = %d, want 100", n)
	}
}
