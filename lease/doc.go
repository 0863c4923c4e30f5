// Package lease decides a hot subject in process: a Limiter takes a block
// of units (a lease) from the strategy it wraps, through that strategy's
// own decision, so Redis has counted every unit before any is spent; it
// spends them locally, one mutex per subject, and takes the next lease
// when they run out or the lease ends.
//
// # Precision
//
// A unit spent later than it was leased still counts for a whole window
// from its use: leasing never lets more through than the algorithm
// promises. The rule per algorithm (L is the lease's lifetime):
//
//   - sliding log and compact log: the lease is decided against the units
//     that count now and recorded L ahead of now, so its units count from
//     the decision until its end + Window; no window (t - Window, t] ever
//     holds more than Limit spent units. What a lease does not spend is
//     not given back: the log's refund takes the newest units, which may
//     be another process's lease.
//   - fixed window: a lease ends no later than the window it was decided
//     in (its ResetAfter), so no aligned window holds more than Limit.
//     What it does not spend lapses with the window (a refund landing
//     after the window's end would come out of the next window).
//   - sliding counter: as the fixed window, a lease ends no later than
//     the aligned window it was decided in (its ResetAfter less one
//     Window), so its units are in that window's count: no aligned window
//     holds more than Limit. A unit spent later than decided was decided
//     against more of the previous window's count than at its use, so
//     the counter's sliding bound holds too. Unspent units lapse.
//   - token bucket and GCRA: the bucket is kept with the burst less the
//     refill of one lifetime, Burst' = Burst - ceil(Limit × L / Window)
//     (New builds the strategy with it), so the units spent in any
//     [t, t'] stay within Burst' + rate × (t' - t + L) <= Burst + rate ×
//     (t' - t), though decided up to L earlier. What a lease does not
//     spend is given back (RefundN) when it ends, when its subject goes
//     idle, and on Close, but only those units the bucket has not refilled
//     since (the bucket refills a lease's units after all taken before
//     them, by the lease decision's ResetAfter): a refund of unspent units
//     leaves the bucket no fuller than had they never been taken. Units
//     held until the bucket refilled them are stranded: given back, they
//     would count twice.
//
// Every process of a subject must lease (with the same lifetime): a
// process deciding directly, with the whole burst, is not bound by
// Burst'.
//
// A lease's lifetime starts when its call is sent, on this process's
// clock; the strategy decides at or after that instant, so local and
// Redis clocks need only tick at the same rate. A process that dies
// loses its lease: under-admission, never over.
//
// # Sizing and fairness
//
// A lease takes half of what this process asked for in one lifetime (an
// EWMA of its demand), so that it runs out about half-way through its
// lifetime: at least the request's cost, and at most capacity/8
// (WithShare). Default lifetime: Window/50, at most 2s (WithLifetime).
// The fairness rule: a process holds at most capacity/8 unspent, leases
// only what its own demand will spend, and a block is taken whole or not
// at all (never cut down to what is left), so under contention a process
// that asks little, in small blocks, passes before one whose large block
// must wait. Redis still serves whoever asks first: leasing serves no
// process worse than deciding each request directly would.
//
// Under-admission is the leased units not spent: per process at most one
// lease (capacity/8, or one lifetime's demand if less) each time its
// demand stops, and for the logs also what counting a lease until its
// end + Window costs, L/(Window + L) of the limit at full use (2 % by
// default).
//
// # Faults
//
// When the wrapped strategy fails (Redis down), the lease still serves
// what it holds until its end; then the error is returned, for the
// caller's failure policy. Redis restarting empty forgets every count, as
// without leases; the leases held then are spent on top, so that window
// holds at most the limit and one lease per process. A denial is served
// in process for up to a lifetime (at most its RetryAfter) without a call.
//
// # Telemetry
//
// Stats counts leases taken, units leased, given back and stranded, and
// the decisions made in process. WithObserver's function is told of each
// lease event (a lease taken or denied, units given back or stranded),
// never of the subject's key. Behind ratelimit.Wrap (or with
// ratelimit.Config.Lease, which builds a Limiter with its defaults), the
// facade's Observer sees every decision, leased or not, as any other,
// those made in process (AllowLocal) marked Cached; with Config.Lease it
// is told of the lease events too.
//
// # Memory
//
// One small struct per subject with a lease, at most WithMaxSubjects
// (10,000 by default; beyond, decisions go to the wrapped strategy). A
// Limiter runs no goroutine of its own: once a lifetime, the call that
// finds a sweep due (one atomic load per decision tells) sweeps before it
// returns, looking at most at 1,024 subjects: it forgets those idle for
// four lifetimes and takes back what ended leases hold. The token bucket's
// and GCRA's refunds of those units, at most 4 per sweep, run on a
// goroutine that lives for those round trips only, one sweep's at a time,
// so that the caller neither waits for them nor strands them by its
// cancellation (they keep its context's values, not its deadline, and
// have 1s each); what a sweep leaves, a later one does. Close is optional:
// it gives back what every lease holds, and waits for a sweep's refunds. A
// Limiter dropped without it (a policy replaced by a reload) leaks nothing;
// its leases end, their unspent units lost to under-admission, at most one
// lease per subject (for the token bucket and GCRA, until the bucket
// refills them).
package lease
