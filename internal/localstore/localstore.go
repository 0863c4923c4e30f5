// Package localstore is the in-process state store of the local twins (and
// of the facade's denial cache): a striped map from subject to state, safe
// for concurrent use, bounded in subjects and freed when idle.
//
// Bound: a Store holds at most MaxSubjects subjects (strategy.DefaultMaxSubjects,
// 2^20, unless set), spread over up to 64 stripes by hash, each holding its
// share. A new subject in a full stripe evicts the stripe's least recently
// used subject, in O(1): the stripe keeps its subjects in a list ordered by
// last use. An evicted subject starts fresh on its next request, as if its
// window had passed: that is what eviction costs in enforcement.
//
// Freeing: each subject's state says when it stops mattering (expires). A
// stripe is swept from its least recently used end, up to the first subject
// used within the last sweep period, dropping what expired: inline, at most
// once per period, by the calls that touch the stripe; and by a timer
// (time.AfterFunc) per stripe, armed only while the stripe holds subjects,
// so idle subjects are freed within about one period of their expiry even
// when no request arrives. The timers hold the Store weakly: a Store that
// its owner dropped is collected, and each of its pending timers then fires
// once more and stops. No goroutine runs between sweeps.
package localstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/ratekit/ratelimit/strategy"
)

// maxStripes is the most stripes a Store has (fewer when MaxSubjects is
// smaller, so that every stripe holds at least one subject).
const maxStripes = 64

// MinSweep is the shortest sweep period of a twin's Store: windows shorter
// than that are swept at this period, so that timers stay cheap.
const MinSweep = 100 * time.Millisecond

// Key names a subject's state: the subject and its shard (-1 when unsharded).
type Key struct {
	Subject string
	Shard   int
}

// Config sets up a Store.
type Config struct {
	// MaxSubjects is the most subjects held at once; 0 means
	// strategy.DefaultMaxSubjects.
	MaxSubjects int
	// Unit is the unit of the instants Do receives and Now returns:
	// time.Millisecond for the twins. 0 means time.Millisecond.
	Unit time.Duration
	// Sweep is the sweep period (at least one Unit).
	Sweep time.Duration
	// Now is the clock of the instants, in Unit, called by the timers; it
	// must be the one the callers of Do read, and safe for concurrent use.
	// nil: timers sweep at the latest instant Do received, which frees
	// idle subjects only while some subject of the Store gets requests.
	Now func() int64
	// OnEvict, when set, is called once per subject evicted to make room
	// for another, under a stripe's lock: it must be quick.
	OnEvict func()
}

// Store maps keys to *V. The zero Store is not usable; call New or NewStore.
//
// A key is hashed once: the hash picks the stripe and is the key of the
// stripe's map, whose entries chain the (astronomically rare) keys that
// share a hash. Hashing the subject a second time inside a map keyed by Key
// cost about a sixth of a warm decision.
type Store[V any] struct {
	seed     maphash.Seed
	mask     uint64 // len(stripes) - 1
	stripes  []stripe[V]
	period   time.Duration // sweep period
	periodU  int64         // the same in Unit
	now      func() int64  // nil: latest
	latest   atomic.Int64  // the latest instant Do received, when now is nil
	onEvict  func()
	evicted  atomic.Uint64
	self     weak.Pointer[Store[V]]
	capacity int
}

type stripe[V any] struct {
	mu        sync.Mutex
	m         map[uint64]*entry[V] // nil until the first subject
	newest    *entry[V]            // the list of subjects by last use
	oldest    *entry[V]
	n, max    int   // subjects held; most subjects held
	nextSweep int64 // the next inline sweep, in Unit
	timer     *time.Timer
	armed     bool     // timer is pending or running
	idx       int      // the stripe's index in the Store
	_         [48]byte // keep stripes on separate cache lines
}

type entry[V any] struct {
	key          Key
	next         *entry[V] // the next key with the same hash
	newer, older *entry[V] // neighbours in the stripe's list by last use
	v            V
	expires      int64 // the state no longer matters at or after this instant
	used         int64 // the instant of the last Do
}

// New returns a Store of at most strategy.DefaultMaxSubjects subjects, on
// instants in milliseconds, that sweeps each stripe at most every sweepMs
// milliseconds (at least 1). Its timers have no clock: see Config.Now.
func New[V any](sweepMs int64) *Store[V] {
	return NewStore[V](Config{Sweep: time.Duration(max(sweepMs, 1)) * time.Millisecond})
}

// NewStore returns a Store set up by c.
func NewStore[V any](c Config) *Store[V] {
	if c.MaxSubjects <= 0 {
		c.MaxSubjects = strategy.DefaultMaxSubjects
	}
	if c.Unit <= 0 {
		c.Unit = time.Millisecond
	}
	c.Sweep = max(c.Sweep, c.Unit)
	n := maxStripes
	for n > 1 && n > c.MaxSubjects {
		n /= 2
	}
	s := &Store[V]{
		seed:     maphash.MakeSeed(),
		mask:     uint64(n - 1),
		stripes:  make([]stripe[V], n),
		period:   c.Sweep,
		periodU:  int64(c.Sweep / c.Unit),
		now:      c.Now,
		onEvict:  c.OnEvict,
		capacity: c.MaxSubjects,
	}
	for i := range s.stripes {
		s.stripes[i].idx = i
		s.stripes[i].max = c.MaxSubjects / n
		if i < c.MaxSubjects%n {
			s.stripes[i].max++
		}
	}
	s.self = weak.Make(s)
	return s
}

// MaxSubjects returns the most subjects the Store holds.
func (s *Store[V]) MaxSubjects() int { return s.capacity }

// Evicted returns how many subjects were evicted to make room for others.
func (s *Store[V]) Evicted() uint64 { return s.evicted.Load() }

func (s *Store[V]) hash(k Key) (*stripe[V], uint64) {
	h := maphash.String(s.seed, k.Subject) + uint64(k.Shard)*0x9e3779b97f4a7c15
	return &s.stripes[h&s.mask], h
}

// find returns the entry of k, or nil.
func (st *stripe[V]) find(h uint64, k Key) *entry[V] {
	e := st.m[h]
	for e != nil && e.key != k {
		e = e.next
	}
	return e
}

// remove unlinks e, stored under h, from the map and the list.
func (st *stripe[V]) remove(h uint64, e *entry[V]) {
	head := st.m[h]
	if head == e {
		if e.next == nil {
			delete(st.m, h)
		} else {
			st.m[h] = e.next
		}
	} else {
		for p := head; p != nil; p = p.next {
			if p.next == e {
				p.next = e.next
				break
			}
		}
	}
	st.unlist(e)
	st.n--
}

// unlist takes e out of the list by last use.
func (st *stripe[V]) unlist(e *entry[V]) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		st.newest = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		st.oldest = e.newer
	}
	e.newer, e.older = nil, nil
}

// pushNewest puts e, not in the list, at its newest end.
func (st *stripe[V]) pushNewest(e *entry[V]) {
	e.older = st.newest
	if st.newest != nil {
		st.newest.newer = e
	} else {
		st.oldest = e
	}
	st.newest = e
}

// touch marks e used at now.
func (st *stripe[V]) touch(e *entry[V], now int64) {
	e.used = now
	if st.newest != e {
		st.unlist(e)
		st.pushNewest(e)
	}
}

// hashOf returns the hash of e's key.
func (s *Store[V]) hashOf(e *entry[V]) uint64 {
	_, h := s.hash(e.key)
	return h
}

// sweepAt drops the subjects expired at now, from the least recently used
// up to the first one used after now - period: the newer ones were swept
// (or used) within the period, and are swept by a later call.
func (s *Store[V]) sweepAt(st *stripe[V], now int64) {
	idle := now - s.periodU
	for e := st.oldest; e != nil; {
		newer := e.newer
		if e.expires <= now {
			st.remove(s.hashOf(e), e)
		} else if e.used > idle {
			break
		}
		e = newer
	}
}

// add stores e, new, under h at now: it evicts the least recently used
// subject when the stripe is full, and arms the stripe's timer.
func (s *Store[V]) add(st *stripe[V], h uint64, e *entry[V], now int64) {
	if st.n >= st.max {
		old := st.oldest
		st.remove(s.hashOf(old), old)
		if old.expires > now {
			s.evicted.Add(1)
			if s.onEvict != nil {
				s.onEvict()
			}
		}
	}
	if st.m == nil {
		st.m = make(map[uint64]*entry[V])
	}
	e.next = st.m[h]
	st.m[h] = e
	e.used = now
	st.pushNewest(e)
	st.n++
	if !st.armed {
		st.armed = true
		if st.timer == nil {
			st.timer = time.AfterFunc(s.period, sweeper(s.self, st.idx))
		} else {
			st.timer.Reset(s.period)
		}
	}
}

// sweeper returns the timer function of stripe i of the Store that self
// points to. It holds the Store weakly, so that a dropped Store is collected
// with its timers pending; their last firing then does nothing.
func sweeper[V any](self weak.Pointer[Store[V]], i int) func() {
	return func() {
		if s := self.Value(); s != nil {
			s.timerSweep(i)
		}
	}
}

// clock returns the instant the timers sweep at.
func (s *Store[V]) clock() int64 {
	if s.now != nil {
		return s.now()
	}
	return s.latest.Load()
}

// timerSweep is the timer of stripe i firing: sweep, then re-arm while the
// stripe holds subjects.
func (s *Store[V]) timerSweep(i int) {
	now := s.clock()
	st := &s.stripes[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	s.sweepAt(st, now)
	st.nextSweep = now + s.periodU
	if st.n == 0 {
		st.armed = false
		return
	}
	st.timer.Reset(s.period)
}

// Do runs fn on the state of k at time now, under the subject's lock. A
// subject not stored, or whose state expired, starts from the zero V. fn
// returns the instant from which the state no longer matters; the subject
// is dropped when that is not after now, and marked used otherwise.
func (s *Store[V]) Do(k Key, now int64, fn func(v *V) (expires int64)) {
	st, h := s.hash(k)
	s.do(st, h, k, now, fn)
}

// do is Do for k, whose hash is h, in stripe st.
func (s *Store[V]) do(st *stripe[V], h uint64, k Key, now int64, fn func(v *V) (expires int64)) {
	if s.now == nil && now > s.latest.Load() {
		s.latest.Store(now) // a race may store an earlier one: sweeps then lag, never run ahead
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if now >= st.nextSweep {
		s.sweepAt(st, now)
		st.nextSweep = now + s.periodU
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
			if stored {
				st.touch(e, now)
			} else {
				s.add(st, h, e, now)
			}
		case stored:
			st.remove(h, e)
		}
		return
	}
	if exp := fn(&e.v); exp > now {
		e.expires = exp
		st.touch(e, now)
	} else {
		st.remove(h, e)
	}
}

// Get returns a copy of the state of k at time now and marks it used, or
// false when k is not stored or its state expired.
func (s *Store[V]) Get(k Key, now int64) (V, bool) {
	st, h := s.hash(k)
	st.mu.Lock()
	defer st.mu.Unlock()
	e := st.find(h, k)
	if e == nil || e.expires <= now {
		var zero V
		return zero, false
	}
	st.touch(e, now)
	return e.v, true
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
		n += st.n
		st.mu.Unlock()
	}
	return n
}
