// Package localstore is the in-process state store of the local twins: a
// striped map from subject to state, safe for concurrent use, that drops a
// subject once its state stops mattering, so memory stays bounded by the
// subjects active within about one window.
package localstore

import (
	"hash/maphash"
	"sync"
)

const stripes = 64

// Key names a subject's state: the subject and its shard (-1 when unsharded).
type Key struct {
	Subject string
	Shard   int
}

// Store maps keys to *V. The zero Store is not usable; call New.
type Store[V any] struct {
	seed    maphash.Seed
	sweep   int64 // ms between sweeps of one stripe
	stripes [stripes]stripe[V]
}

type stripe[V any] struct {
	mu        sync.Mutex
	m         map[Key]*entry[V]
	nextSweep int64
	_         [40]byte // keep stripes on separate cache lines
}

type entry[V any] struct {
	v       V
	expires int64 // ms; the state no longer matters at or after this instant
}

// New returns a Store that sweeps each stripe for expired subjects at most
// every sweepMs milliseconds (at least 1).
func New[V any](sweepMs int64) *Store[V] {
	s := &Store[V]{seed: maphash.MakeSeed(), sweep: max(sweepMs, 1)}
	for i := range s.stripes {
		s.stripes[i].m = make(map[Key]*entry[V])
	}
	return s
}

func (s *Store[V]) stripe(k Key) *stripe[V] {
	h := maphash.String(s.seed, k.Subject) + uint64(k.Shard)
	return &s.stripes[h%stripes]
}

// Do runs fn on the state of k at time now (ms), under the subject's lock.
// A subject not stored, or whose state expired, starts from the zero V. fn
// returns the instant (ms) from which the state no longer matters; the
// subject is dropped when that is not after now.
func (s *Store[V]) Do(k Key, now int64, fn func(v *V) (expires int64)) {
	st := s.stripe(k)
	st.mu.Lock()
	defer st.mu.Unlock()
	if now >= st.nextSweep {
		for key, e := range st.m {
			if e.expires <= now {
				delete(st.m, key)
			}
		}
		st.nextSweep = now + s.sweep
	}
	e := st.m[k]
	if e == nil || e.expires <= now {
		if e == nil {
			e = new(entry[V])
		} else {
			var zero V
			e.v = zero
		}
		if exp := fn(&e.v); exp > now {
			e.expires = exp
			st.m[k] = e
		} else {
			delete(st.m, k)
		}
		return
	}
	if exp := fn(&e.v); exp > now {
		e.expires = exp
	} else {
		delete(st.m, k)
	}
}

// Delete drops the state of k.
func (s *Store[V]) Delete(k Key) {
	st := s.stripe(k)
	st.mu.Lock()
	delete(st.m, k)
	st.mu.Unlock()
}

// Len returns the number of subjects stored, expired or not.
func (s *Store[V]) Len() int {
	n := 0
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		n += len(st.m)
		st.mu.Unlock()
	}
	return n
}
