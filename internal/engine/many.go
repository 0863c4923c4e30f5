package engine

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A script of Script has a twin that decides many requests in one
// invocation: its body becomes a function of KEYS and ARGV, called once
// per request, in order, each seeing what the ones before it wrote, as if
// each were its own call (Redis runs a script atomically either way). Its
// KEYS are the requests' keys one after the other; its ARGV
//
//	r, then r triples (requests, keys of each, arguments), then each run's arguments
//
// where a run is requests in a row with as many keys and the same
// arguments, which go once and which its requests' bodies share (the
// bodies only read KEYS and ARGV, and keep neither: a request of one key
// gets the same KEYS table as the one before it, refilled). Requests of
// one strategy and limit differ only in their keys, so an invocation of
// them is one run: Redis parses, and copies into Lua, three numbers and
// one set of arguments beside the keys. It returns
// one reply per request: the body's, or the error it raised (pcall), so
// that a failing request fails alone. The requests read the server's TIME
// once per invocation (now_ms caches it): they are decided at the same
// instant.
const manyDriver = `
end
local unpack = table.unpack or unpack
local runs = ARGV[1] + 0
local ki, ai, i, out, one = 1, 2 + 3 * runs, 0, {}, {}
for g = 3, 3 * runs + 1, 3 do
  local count, nk, na = ARGV[g - 1] + 0, ARGV[g] + 0, ARGV[g + 1] + 0
  local args = {unpack(ARGV, ai, ai + na - 1)}
  ai = ai + na
  for _ = 1, count do
    local keys = one
    if nk == 1 then
      one[1] = KEYS[ki]
    else
      keys = {unpack(KEYS, ki, ki + nk - 1)}
    end
    local ok, r = pcall(decide, keys, args)
    if not ok then
      if type(r) ~= 'table' then
        r = redis.error_reply(tostring(r))
      end
    elseif r == nil then
      r = false
    end
    i = i + 1
    out[i] = r
    ki = ki + nk
  end
end
return out
`

// manyOf maps each script of Script to its twin for many requests.
var manyOf sync.Map // *redis.Script -> *redis.Script

// manyScript returns the body srcs as the twin of Script's script.
func manyScript(srcs []string) *redis.Script {
	var b strings.Builder
	b.WriteString(prelude)
	b.WriteString("\nlocal function decide(KEYS, ARGV)\n")
	for _, s := range srcs {
		b.WriteString(s)
	}
	b.WriteString(manyDriver)
	return redis.NewScript(b.String())
}

// Many returns the twin of s, a script of Script, that decides many
// requests in one invocation; nil for any other script.
func Many(s *redis.Script) *redis.Script {
	if s == nil {
		return nil
	}
	m, _ := manyOf.Load(s)
	ms, _ := m.(*redis.Script)
	return ms
}

// group is the calls Send sends as one command: one call, or several of
// one script (in one hash slot on a cluster) as its twin's invocation.
type group struct {
	idx []int // the calls, in order
	cmd *redis.Cmd
}

// groups partitions the calls idx of cs into commands: the calls of one
// script with a twin (Many) share one when together (bySlot: and of one
// hash tag), the others have one each. eval sends scripts with their
// text (EVAL), never grouped.
func groups(ctx context.Context, cs []*Call, idx []int, eval, bySlot bool) []group {
	gs := make([]group, 0, len(idx))
	type key struct {
		s   *redis.Script
		tag string
	}
	var at map[key]int // the group of each key
	for _, i := range idx {
		c := cs[i]
		if eval || c.Raw || len(c.Keys) == 0 {
			gs = append(gs, group{idx: []int{i}})
			continue
		}
		k := key{s: c.Script}
		if bySlot {
			if k.tag = hashTag(c.Keys[0]); k.tag == "" {
				gs = append(gs, group{idx: []int{i}})
				continue
			}
		}
		if at == nil {
			at = make(map[key]int, len(idx))
		}
		if g, ok := at[k]; ok && Many(c.Script) != nil {
			gs[g].idx = append(gs[g].idx, i)
			continue
		}
		at[k] = len(gs)
		gs = append(gs, group{idx: []int{i}})
	}
	for j := range gs {
		g := &gs[j]
		if len(g.idx) == 1 {
			g.cmd = cs[g.idx[0]].cmd(ctx, eval)
		} else {
			g.cmd = manyCmd(ctx, cs, g.idx)
		}
	}
	return gs
}

// manyCmd builds the EVALSHA of the twin of the script of the calls idx
// of cs (see Many).
func manyCmd(ctx context.Context, cs []*Call, idx []int) *redis.Cmd {
	type run struct{ first, n int } // the run's first call, and its calls
	var buf [4]run
	runs := buf[:0]
	nk, na := 0, 0
	for _, i := range idx {
		c := cs[i]
		nk += len(c.Keys)
		if len(runs) > 0 {
			r := &runs[len(runs)-1]
			if f := cs[r.first]; len(f.Keys) == len(c.Keys) && sameArgs(f.Args, c.Args) {
				r.n++
				continue
			}
		}
		runs = append(runs, run{i, 1})
		na += len(c.Args)
	}
	a := make([]any, 3, 3+nk+1+3*len(runs)+na)
	a[0], a[1], a[2] = "evalsha", Many(cs[idx[0]].Script).Hash(), nk
	for _, i := range idx {
		for _, k := range cs[i].Keys {
			a = append(a, k)
		}
	}
	a = append(a, len(runs))
	for _, r := range runs {
		f := cs[r.first]
		a = append(a, r.n, len(f.Keys), len(f.Args))
	}
	for _, r := range runs {
		a = append(a, cs[r.first].Args...)
	}
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// hashTag returns the hash tag of key ({tag}), "" when it has none: keys
// of one tag are in one hash slot.
func hashTag(key string) string {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return ""
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return ""
	}
	return key[s+1 : s+1+e]
}

// sameArgs reports whether a and b are the same arguments: of equal
// length, and each a string or a number equal to its twin.
func sameArgs(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		switch x.(type) {
		case string, int, int64, float64:
			if x != b[i] { // x is comparable: never panics
				return false
			}
		default:
			return false
		}
	}
	return true
}
