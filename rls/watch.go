package rls

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
)

// NewBuilder returns the Builder of a Server on rdb: ratelimit.New with
// each descriptor's Config, its Prefix (the algorithm's, so that a reload
// changing a descriptor's algorithm never reads another's state) under
// prefix, and opts. rdb may be a batching client (package batch).
func NewBuilder(rdb redis.Scripter, prefix string, opts ...ratelimit.Option) Builder {
	return func(cfg ratelimit.Config) (*ratelimit.Limiter, error) {
		cfg.Prefix = prefix + cfg.Prefix
		if cfg.Candidate != nil {
			cc := *cfg.Candidate
			cc.Prefix = prefix + cc.Prefix
			cfg.Candidate = &cc
		}
		return ratelimit.New(rdb, cfg, opts...)
	}
}

// fingerprint describes path's configuration files as they are on disk:
// names, sizes and modification times. Two equal fingerprints mean
// nothing to reload.
func fingerprint(path string) string {
	files, err := configFiles(path)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "%s %d %d\n", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String()
}

// Watch polls path's files every interval (names, sizes and modification
// times) and, when they differ from those of the Config in use (or of the
// last refused one), reloads s from them with build; a refused
// configuration keeps the previous one (see Reload). It returns when ctx
// ends. Polling needs no inotify, follows the symlink swaps of Kubernetes
// ConfigMaps and works on network filesystems; one stat per file a
// second costs nothing.
func (s *Server) Watch(ctx context.Context, path string, interval time.Duration, build Builder) {
	last := ""
	if c := s.Config(); c != nil {
		last = c.print
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fp := fingerprint(path)
		if fp == last {
			continue
		}
		last = fp
		_ = s.Reload(path, build) // logged, and the old configuration kept
	}
}
