package testredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterMasters is the number of masters StartClusterProcess, StartCluster
// and SharedCluster start.
const ClusterMasters = 3

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of cluster-enabled redis-server processes
// (ClusterMasters of them unless made by StartClusterOf) on loopback ports,
// each master owning an equal range of slots,
// with no replicas. Start one with StartCluster, SharedCluster or
// StartClusterProcess.
type Cluster struct {
	// Nodes are the masters; Nodes[i] owns Slots[i].
	Nodes []*Server
	// Slots are the slot ranges of the masters, [first, last] inclusive.
	Slots [][2]int
	// BusPorts are the masters' cluster bus ports.
	BusPorts []int
}

// Addrs returns the masters' addresses, to seed a ClusterClient.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// NewClient returns a cluster client of c; the caller closes it.
func (c *Cluster) NewClient() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}

// Client returns a cluster client of c closed when t ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := c.NewClient()
	t.Cleanup(func() { cc.Close() })
	return cc
}

// NodeOf returns the index in c.Nodes of the master that owns slot.
func (c *Cluster) NodeOf(slot int) int {
	for i, r := range c.Slots {
		if slot >= r[0] && slot <= r[1] {
			return i
		}
	}
	return -1
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// StartClusterProcess starts a cluster of ClusterMasters masters (see
// StartClusterOf). The caller must Close it.
func StartClusterProcess() (*Cluster, error) { return StartClusterOf(ClusterMasters) }

// StartClusterOf starts n cluster-enabled redis-server processes, each with
// its own directory and cluster config file, gives each an equal range of
// slots and a distinct config epoch, makes them meet, and waits until every
// node reports cluster_state:ok and all nodes agree on who owns which
// slots. The caller must Close it. It takes a second or two, most of it
// gossip. It needs no testing.TB: the report command uses it too.
func StartClusterOf(n int) (*Cluster, error) {
	if n < 1 || n > clusterSlots {
		return nil, fmt.Errorf("testredis: a cluster needs 1 to %d masters, got %d", clusterSlots, n)
	}
	c := &Cluster{}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		// The bus port is chosen too: the default, port+10000, may be
		// taken or above 65535. The config file name is relative to the
		// node's own --dir.
		bus, err := FreePort()
		if err != nil {
			return nil, err
		}
		s, err := StartProcess("--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000", "--cluster-require-full-coverage", "yes")
		if err != nil {
			return nil, fmt.Errorf("start cluster node %d: %w", i, err)
		}
		c.Nodes = append(c.Nodes, s)
		c.BusPorts = append(c.BusPorts, bus)
		first := i * clusterSlots / n
		last := (i+1)*clusterSlots/n - 1
		c.Slots = append(c.Slots, [2]int{first, last})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		defer clients[i].Close()
	}
	for i, cl := range clients {
		// Distinct epochs spare the nodes the collision-resolution round
		// (redis-cli --cluster create does the same).
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return nil, fmt.Errorf("cluster node %s: CLUSTER SET-CONFIG-EPOCH: %w", c.Nodes[i].Addr, err)
		}
		if err := cl.ClusterAddSlotsRange(ctx, c.Slots[i][0], c.Slots[i][1]).Err(); err != nil {
			return nil, fmt.Errorf("cluster node %s: CLUSTER ADDSLOTSRANGE: %w", c.Nodes[i].Addr, err)
		}
	}
	for i, cl := range clients {
		for j, n := range c.Nodes {
			if i != j {
				// CLUSTER MEET ip port cluster-port: the bus port is not port+10000
				if err := cl.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.Port, c.BusPorts[j]).Err(); err != nil {
					return nil, fmt.Errorf("cluster node %s: CLUSTER MEET %s: %w", c.Nodes[i].Addr, n.Addr, err)
				}
			}
		}
	}
	if err := c.waitReady(ctx, clients); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// waitReady polls every node until it reports cluster_state:ok, knows all
// nodes and maps every slot range to the expected master.
func (c *Cluster) waitReady(ctx context.Context, clients []*redis.Client) error {
	ids := make([]string, len(clients))
	for i, cl := range clients {
		id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("cluster node %s: CLUSTER MYID: %w", c.Nodes[i].Addr, err)
		}
		ids[i] = id
	}
	var last error
	for {
		last = nil
		for i, cl := range clients {
			if err := c.nodeReady(ctx, cl, ids); err != nil {
				last = fmt.Errorf("cluster node %s: %w", c.Nodes[i].Addr, err)
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster not ready: %w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) nodeReady(ctx context.Context, cl *redis.Client, ids []string) error {
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:" + strconv.Itoa(clusterSlots),
		"cluster_known_nodes:" + strconv.Itoa(len(ids))} {
		if !strings.Contains(info, want+"\r\n") && !strings.HasSuffix(strings.TrimSpace(info), want) {
			return fmt.Errorf("CLUSTER INFO lacks %s", want)
		}
	}
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		return err
	}
	owned := 0
	for _, sh := range shards {
		var master string
		for _, n := range sh.Nodes {
			if n.Role == "master" && n.Health == "online" {
				master = n.ID
			}
		}
		for _, r := range sh.Slots {
			i := slices.IndexFunc(c.Slots, func(want [2]int) bool { return int64(want[0]) == r.Start && int64(want[1]) == r.End })
			if i < 0 || master != ids[i] {
				return fmt.Errorf("CLUSTER SHARDS: slots %d-%d not yet owned as assigned", r.Start, r.End)
			}
			owned++
		}
	}
	if owned != len(ids) {
		return fmt.Errorf("CLUSTER SHARDS lists %d slot ranges, want %d", owned, len(ids))
	}
	return nil
}

// StartCluster starts a cluster for the test t and stops it when t ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := StartClusterProcess()
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(c.Close)
	return c
}

var (
	sharedClusterMu  sync.Mutex
	sharedCluster    *Cluster
	sharedClusterErr error
)

// SharedCluster returns one cluster shared by the tests of this test binary,
// started on first use. The test binary must call Main from TestMain so it
// is stopped at exit. Tests sharing it must use keys of their own (see
// Prefix), never FLUSHALL.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	sharedClusterMu.Lock()
	defer sharedClusterMu.Unlock()
	if sharedCluster == nil && sharedClusterErr == nil {
		sharedCluster, sharedClusterErr = StartClusterProcess()
	}
	if sharedClusterErr != nil {
		fatal(t, sharedClusterErr)
	}
	return sharedCluster
}

// closeSharedCluster stops the shared cluster, if one was started; Main
// calls it.
func closeSharedCluster() {
	sharedClusterMu.Lock()
	defer sharedClusterMu.Unlock()
	if sharedCluster != nil {
		sharedCluster.Close()
		sharedCluster = nil
	}
	sharedClusterErr = errors.New("testredis: shared cluster already closed")
}
