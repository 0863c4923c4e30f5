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
//
// A key is hashed once: the hash picks the stripe and is the key of the
// stripe's map, whose entries chain the (astronomically rare) keys that
// share a hash. Hashing the subject a second time inside a map keyed by Key
// cost about a sixth of a warm decision.
type Store[V any] struct {
	seed    maphash.Seed
	sweep   int64 // ms between sweeps of one stripe
	stripes [stripes]stripe[V]
}

type stripe[V any] struct {
	mu        sync.Mutex
	m         map[uint64]*entry[V]
	nextSweep int64
	_         [40]byte // keep stripes on separate cache lines
}

type entry[V any] struct {
	key     Key
	next    *entry[V] // the next key with the same hash
	v       V
	expires int64 // ms; the state no longer matters at or after this instant
}

// New returns a Store that sweeps each stripe for expired subjects at most
// every sweepMs milliseconds (at least 1).
func New[V any](sweepMs int64) *Store[V] {
	s := &Store[V]{seed: maphash.MakeSeed(), sweep: max(sweepMs, 1)}
	for i := range s.stripes {
		s.stripes[i].m = make(map[uint64]*entry[V])
	}
	return s
}

func (s *Store[V]) hash(k Key) (*stripe[V], uint64) {
	h := maphash.String(s.seed, k.Subject) + uint64(k.Shard)*0x9e3779b97f4a7c15
	return &s.stripes[h%stripes], h
}

// find returns the entry of k, or nil.
func (st *stripe[V]) find(h uint64, k Key) *entry[V] {
	e := st.m[h]
	for e != nil && e.key != k {
		e = e.next
	}
	return e
}

// remove unlinks e, stored under h.
func (st *stripe[V]) remove(h uint64, e *entry[V]) {
	head := st.m[h]
	if head == e {
		if e.next == nil {
			delete(st.m, h)
		} else {
			st.m[h] = e.next
		}
		return
	}
	for p := head; p != nil; p = p.next {
		if p.next == e {
			p.next = e.next
			return
		}
	}
}

// sweepAt drops every entry expired at now.
func (st *stripe[V]) sweepAt(now int64) {
	for h, head := range st.m {
		for e := head; e != nil; e = e.next {
			if e.expires <= now {
				st.remove(h, e)
			}
		}
	}
}

// Do runs fn on the state of k at time now (ms), under the subject's lock.
// A subject not stored, or whose state expired, starts from the zero V. fn
// returns the instant (ms) from which the state no longer matters; the
// subject is dropped when that is not after now.
func (s *Store[V]) Do(k Key, now int64, fn func(v *V) (expires int64)) {
	st, h := s.hash(k)
	s.do(st, h, k, now, fn)
}

// do is Do for k, whose hash is h, in stripe st.
func (s *Store[V]) do(st *stripe[V], h uint64, k Key, now int64, fn func(v *V) (expires int64)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if now >= st.nextSweep {
		st.sweepAt(now)
		st.nextSweep = now + s.sweep
	}
	e := st.find(h, k)
	if e == nil || e.expires <= now {
		stored := e != nil
		if e == nil {
			e = &entry[V]{key: k}
		} else {
			var zero V
			e.v = zero
		}
		switch exp := fn(&e.v); {
		case exp > now:
			e.expires = exp
			if !stored {
				e.next = st.m[h]
				st.m[h] = e
			}
		case stored:
			st.remove(h, e)
		}
		return
	}
	if exp := fn(&e.v); exp > now {
		e.expires = exp
	} else {
		st.remove(h, e)
	}
}

// Delete drops the state of k.
func (s *Store[V]) Delete(k Key) {
	st, h := s.hash(k)
	st.delete(h, k)
}

// delete is Delete for k, whose hash is h.
func (st *stripe[V]) delete(h uint64, k Key) {
	st.mu.Lock()
	if e := st.find(h, k); e != nil {
		st.remove(h, e)
	}
	st.mu.Unlock()
}

// Len returns the number of subjects stored, expired or not.
func (s *Store[V]) Len() int {
	n := 0
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		for _, e := range st.m {
			for ; e != nil; e = e.next {
				n++
			}
		}
		st.mu.Unlock()
	}
	return n
}
