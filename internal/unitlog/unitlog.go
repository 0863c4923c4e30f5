// Package unitlog is the in-process sliding log that the twins of slidinglog
// and multilimit share: one entry per recorded request, in a ring buffer,
// each entry carrying the time it was recorded at and the running count of
// units recorded up to and including it. It is the same layout as the
// sorted set of the Redis scripts, so the twins make the same decisions
// with the same work: a request of n units is one entry whatever n,
// counting the live units and finding the k-th oldest live unit are binary
// searches, and eviction moves an index, not entries.
//
// Recording times never decrease: a request is recorded at max(now, the
// newest entry's time), and a request recorded in the same millisecond as
// the newest entry is merged into it. So a clock that steps back costs what
// a step forward costs (see package slidinglog for what it means for
// decisions).
//
// A Log is not safe for concurrent use; the twins hold it under their
// store's lock. The zero Log is empty and ready to use.
package unitlog

// entry is one recorded request (or several merged in one millisecond).
type entry struct {
	t   int64  // ms it was recorded at; strictly increasing along the log
	cum uint64 // units recorded up to and including this entry, since the base
}

// Log is a sliding log of units. The zero Log is empty.
type Log struct {
	buf  []entry // ring buffer; entries oldest first from head
	head int
	n    int
	base uint64 // cum of the last evicted entry: what the oldest entry's cum counts from
}

// at returns entry i (0 is the oldest). The buffer's size is a power of
// two.
func (g *Log) at(i int) *entry { return &g.buf[(g.head+i)&(len(g.buf)-1)] }

// Len returns the number of entries.
func (g *Log) Len() int { return g.n }

// Newest returns the time of the newest entry, and false when the log is
// empty.
func (g *Log) Newest() (int64, bool) {
	if g.n == 0 {
		return 0, false
	}
	return g.at(g.n - 1).t, true
}

// first returns the index of the oldest entry recorded after floor (g.n if
// none), by an exponential search from the oldest entry: O(log e) for e
// entries at or before floor, usually none or one.
func (g *Log) first(floor int64) int {
	if g.n == 0 || g.at(0).t > floor {
		return 0
	}
	lo, hi := 1, 2 // at(lo-1) <= floor
	for hi < g.n && g.at(hi-1).t <= floor {
		lo, hi = hi, 2*hi
	}
	hi = min(hi, g.n)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if g.at(mid).t > floor {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// before returns the running count just before entry i.
func (g *Log) before(i int) uint64 {
	if i == 0 {
		return g.base
	}
	return g.at(i - 1).cum
}

// Count returns the units recorded after floor: the live units of a window
// whose floor (now - Window) is floor.
func (g *Log) Count(floor int64) int64 {
	if g.n == 0 {
		return 0
	}
	return int64(g.at(g.n-1).cum - g.before(g.first(floor)))
}

// Leaves returns the time of the entry that holds the k-th oldest unit
// recorded after floor (k >= 1, at most Count(floor)): once that entry
// leaves the window, k units have left.
func (g *Log) Leaves(floor, k int64) int64 {
	lo, hi := g.first(floor), g.n-1
	b := g.before(lo)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(g.at(mid).cum-b) >= k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return g.at(lo).t
}

// Evict drops the entries recorded at or before floor.
func (g *Log) Evict(floor int64) {
	i := g.first(floor)
	if i == 0 {
		return
	}
	g.base = g.before(i)
	g.head = (g.head + i) & (len(g.buf) - 1)
	g.n -= i
	if g.n == 0 {
		g.head, g.base = 0, 0
	}
	if len(g.buf) > 64 && g.n < len(g.buf)/8 {
		g.resize(len(g.buf) / 4) // amortized O(1): 3/4 of the buffer was evicted since it grew
	}
}

// Record records units at max(now, the newest entry's time), merging them
// into the newest entry when that is the same millisecond, and returns the
// time they were recorded at.
func (g *Log) Record(now, units int64) int64 {
	if g.n > 0 {
		e := g.at(g.n - 1)
		if e.t >= now {
			e.cum += uint64(units)
			return e.t
		}
	}
	if g.n == len(g.buf) {
		g.resize(max(2*len(g.buf), 2))
	}
	prev := g.before(g.n)
	*g.at(g.n) = entry{t: now, cum: prev + uint64(units)}
	g.n++
	return now
}

// resize moves the entries to a buffer of size entries (>= g.n, a power of
// two): the only work in proportion to the log's size, amortized O(1) per
// recorded request since the size doubles or quarters.
func (g *Log) resize(size int) {
	nb := make([]entry, size)
	for i := 0; i < g.n; i++ {
		nb[i] = *g.at(i)
	}
	g.buf, g.head = nb, 0
}
