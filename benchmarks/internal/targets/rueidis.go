package targets

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// The rueidis rows: the strongest auto-pipelining Go client, with its
// defaults (every concurrent command shares its connection's pipeline),
// measured on the same server through a client of its own (Env.Addrs; rueidis finds out
// itself whether they are a cluster's).

// RueidisTargets returns rueidis's own floor (EVALSHA of `return 1`, like
// FloorTarget) and a fixed window equivalent to rueidis's rueidislimiter:
// its script's commands (GET of the window's expiry key, a SET of both
// keys when a window starts, INCRBY always) and its decision (allowed
// while the count after the increment is at most the limit), written
// again here since rueidislimiter is a module of its own.
func RueidisTargets() []Target {
	return []Target{
		{Name: "peer:rueidis floor", Kind: Peer, Algorithm: "EVALSHA return 1",
			Note: "rueidis v1.0.79, default options: auto-pipelined EVALSHA of `return 1`",
			New:  newRueidisFloor, OwnClient: true, Stateless: true},
		{Name: "peer:rueidislimiter fixed_window", Kind: Peer, Algorithm: "fixed_window",
			Note: "rueidislimiter's script and AllowN on rueidis v1.0.79, default options; client clock; denied requests are counted",
			New:  newRueidisLimiter, OwnClient: true},
	}
}

// rueidisClient is a rueidis client of its own on e.Addrs.
func rueidisClient(e Env) (rueidis.Client, error) {
	if len(e.Addrs) == 0 {
		return nil, errors.New("rueidis: needs a real redis-server (Env.Addrs)")
	}
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: e.Addrs})
}

var rueidisFloorScript = rueidis.NewLuaScript("return 1")

type rueidisFloor struct{ c rueidis.Client }

func (f rueidisFloor) Decide(ctx context.Context, subject string) (bool, error) {
	return true, rueidisFloorScript.Exec(ctx, f.c, []string{subject}, nil).Error()
}

func (f rueidisFloor) Close() error { f.c.Close(); return nil }

func newRueidisFloor(e Env) (Decider, error) {
	c, err := rueidisClient(e)
	if err != nil {
		return nil, err
	}
	return rueidisFloor{c}, nil
}

// rueidisWindow starts a window when the expiry key is missing or past
// (both keys then live until a second after its end), then counts the
// request whatever the count: KEYS counter, expiry; ARGV cost, the
// window's end if one starts now, now (ms).
var rueidisWindow = rueidis.NewLuaScript(`
local cost, next_end, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ends = tonumber(redis.call("get", KEYS[2]))
if not ends or ends < now then
  redis.call("set", KEYS[1], 0, "pxat", next_end + 1000)
  redis.call("set", KEYS[2], next_end, "pxat", next_end + 1000)
  ends = next_end
end
return {redis.call("incrby", KEYS[1], cost), ends}
`)

type rueidisLimiter struct {
	c      rueidis.Client
	limit  int64
	window time.Duration
}

func (l rueidisLimiter) Decide(ctx context.Context, subject string) (bool, error) {
	now := time.Now()
	key := "rueidislimiter:{" + subject + "}"
	arr, err := rueidisWindow.Exec(ctx, l.c, []string{key, key + ":ex"}, []string{
		"1", strconv.FormatInt(now.Add(l.window).UnixMilli(), 10), strconv.FormatInt(now.UnixMilli(), 10),
	}).ToArray()
	if err != nil {
		return false, err
	}
	if len(arr) != 2 {
		return false, errors.New("rueidislimiter: invalid reply")
	}
	count, err := arr[0].ToInt64()
	if err != nil {
		return false, err
	}
	return count <= l.limit, nil
}

func (l rueidisLimiter) Close() error { l.c.Close(); return nil }

func newRueidisLimiter(e Env) (Decider, error) {
	c, err := rueidisClient(e)
	if err != nil {
		return nil, err
	}
	return rueidisLimiter{c: c, limit: e.Limit.Limit, window: e.Limit.Window}, nil
}
