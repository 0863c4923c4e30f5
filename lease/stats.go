package lease

import "sync/atomic"

// Stats are a Limiter's counters since New.
type Stats struct {
	Leases   int64 // leases taken (each one call to the wrapped strategy)
	Taken    int64 // units leased
	Returned int64 // units given back (refunds that landed)
	Stranded int64 // units leased, not spent and not given back (lapsed with a window, refilled while held, or a failed refund): the under-admission
	Local    int64 // decisions made in process, without a call
}

type counters struct {
	leases, taken, returned, stranded, local atomic.Int64
}

// Stats returns the limiter's counters. It is safe for concurrent use.
func (l *Limiter) Stats() Stats {
	return Stats{
		Leases: l.stats.leases.Load(), Taken: l.stats.taken.Load(), Returned: l.stats.returned.Load(),
		Stranded: l.stats.stranded.Load(), Local: l.stats.local.Load(),
	}
}

// Op is what a lease Event reports.
type Op string

// The lease events.
const (
	OpTake     Op = "take"      // a lease asked of the strategy: Allowed, or denied, or Err
	OpGiveBack Op = "give_back" // units of an ended lease given back (the bucket's rule)
	OpStrand   Op = "strand"    // units of an ended lease neither spent nor given back
)

// Event is one lease event, as WithObserver's function sees it.
type Event struct {
	Op      Op
	Units   int64 // the block asked for (OpTake), or the units given back or stranded
	Allowed bool  // OpTake: the strategy allowed the block
	Err     error // the strategy's error, if any (OpTake; OpStrand after a failed refund)
}
