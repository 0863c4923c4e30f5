package unitlog

import _ "embed"

// RefundLua defines the Lua function refundlog(key, window, now, r): the
// sliding log's refund on its sorted set, the head of slidinglog's and
// multilimit's refund scripts (see refund.lua).
//
//go:embed refund.lua
var RefundLua string

// KthLua defines M and the Lua function kth(key, brank, base, top, k): the
// rank and entry of a sorted-set log holding its k-th oldest live unit.
// Every script on such a log starts with it (see kth.lua).
//
//go:embed kth.lua
var KthLua string

// Refund takes back up to r of the units recorded after floor, newest
// first: whole entries are dropped from the newest end and the entry where
// the refund stops keeps its older units. It returns the units taken back,
// min(r, Count(floor)). Entries at or before floor are never touched, so
// what left the window is not given back twice. The work is one step per
// entry dropped (each entry was recorded once), amortized O(1).
func (g *Log) Refund(floor, r int64) int64 {
	r = min(r, g.Count(floor))
	left := r
	for left > 0 {
		e := g.at(g.n - 1)
		units := int64(e.cum - g.before(g.n-1))
		if units > left {
			e.cum -= uint64(left)
			break
		}
		left -= units
		g.n--
	}
	if g.n == 0 {
		g.head, g.base = 0, 0
	}
	return r
}
