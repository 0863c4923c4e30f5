package guard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// workerIdle is how long an idle worker waits for a call before it exits.
const workerIdle = 500 * time.Millisecond

// maxIdleWorkers bounds the idle workers kept; more exit at once.
const maxIdleWorkers = 1024

// workers runs calls to a strategy that does not stop at the context's
// deadline on goroutines that outlive one call: a fresh goroutine per call
// would grow its stack through go-redis's deep call path on every
// decision. A worker that stays idle for workerIdle exits, so an idle
// process keeps no goroutines.
type workers struct {
	mu   sync.Mutex
	idle []*worker // most recently used last
}

type worker struct{ in chan *job }

type reply struct {
	r   strategy.Result
	err error
}

// job is one call. Its state moves once, from running to replied (the
// worker sends the reply) or to abandoned (the caller left at its deadline;
// the worker then exits when the call returns, and no one waits for it).
type job struct {
	ctx   context.Context
	st    strategy.Strategy
	c     Call
	state atomic.Int32
	out   chan reply
}

const (
	jobRunning int32 = iota
	jobReplied
	jobAbandoned
)

// start makes c on st with ctx on a worker and returns its job, whose out
// receives the reply unless the caller abandons it.
func (p *workers) start(ctx context.Context, st strategy.Strategy, c Call) *job {
	j := &job{ctx: ctx, st: st, c: c, out: make(chan reply, 1)}
	p.get() <- j
	return j
}

// abandon gives up on j. It reports false when the reply has already been
// sent: the caller then takes it from j.out.
func (j *job) abandon() bool { return j.state.CompareAndSwap(jobRunning, jobAbandoned) }

// get returns the input of an idle worker, or of a new one.
func (p *workers) get() chan<- *job {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w.in
	}
	p.mu.Unlock()
	w := &worker{in: make(chan *job)}
	go p.run(w)
	return w.in
}

// put makes w idle; it reports false when enough workers are idle already.
func (p *workers) put(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleWorkers {
		return false
	}
	p.idle = append(p.idle, w)
	return true
}

// remove takes w out of the idle list; it reports false when a caller has
// taken w already (its job is on the way).
func (p *workers) remove(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return true
		}
	}
	return false
}

func (p *workers) run(w *worker) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case j := <-w.in:
			r, err := Do(j.ctx, j.st, j.c)
			if !j.state.CompareAndSwap(jobRunning, jobReplied) {
				return // abandoned: the caller is gone
			}
			j.out <- reply{r, err}
			if !p.put(w) {
				return
			}
			idle.Reset(workerIdle)
		case <-idle.C:
			if p.remove(w) {
				return
			}
			// a caller took w just now: its job comes next
			idle.Reset(workerIdle)
		}
	}
}
