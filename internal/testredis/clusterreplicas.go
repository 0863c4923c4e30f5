package testredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplicatedCluster is a Cluster whose every master has one replica.
// Start one with StartReplicatedCluster or StartReplicatedClusterProcess.
type ReplicatedCluster struct {
	*Cluster
	// Replicas[i] is the replica of Nodes[i]; Failover swaps the two.
	Replicas []*Server
}

// StartReplicatedCluster starts a ReplicatedCluster for t, stopped when t
// ends.
func StartReplicatedCluster(t testing.TB) *ReplicatedCluster {
	t.Helper()
	c, err := StartReplicatedClusterProcess()
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(c.Close)
	return c
}

// StartReplicatedClusterProcess starts a cluster of ClusterMasters masters
// (StartClusterOf), then one cluster-enabled node per master that meets
// the cluster and replicates it (CLUSTER REPLICATE), and waits, 30 s at
// most, until every replica is in sync and every node lists it. The
// caller must Close it.
func StartReplicatedClusterProcess() (*ReplicatedCluster, error) {
	base, err := StartClusterOf(ClusterMasters)
	if err != nil {
		return nil, err
	}
	c := &ReplicatedCluster{Cluster: base}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		if ids[i], err = nodeID(ctx, n.Addr); err != nil {
			return nil, err
		}
	}
	for i, n := range c.Nodes {
		// A master syncs its replica at once (the default waits 5 s for more).
		if err := do(ctx, n.Addr, "CONFIG", "SET", "repl-diskless-sync", "yes", "repl-diskless-sync-delay", "0"); err != nil {
			return nil, fmt.Errorf("cluster node %s: CONFIG SET: %w", n.Addr, err)
		}
		bus, err := FreePort()
		if err != nil {
			return nil, err
		}
		s, err := StartProcess("--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000", "--cluster-require-full-coverage", "yes",
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
		if err != nil {
			return nil, fmt.Errorf("start the replica of cluster node %d: %w", i, err)
		}
		c.Replicas = append(c.Replicas, s)
		if err := do(ctx, s.Addr, "CLUSTER", "MEET", "127.0.0.1", c.Nodes[i].Port, c.BusPorts[i]); err != nil {
			return nil, fmt.Errorf("cluster replica %s: CLUSTER MEET %s: %w", s.Addr, c.Nodes[i].Addr, err)
		}
	}
	// CLUSTER REPLICATE needs the master known (the handshake done): each
	// is retried until it is, all meeting meanwhile.
	for i, s := range c.Replicas {
		for {
			err := do(ctx, s.Addr, "CLUSTER", "REPLICATE", ids[i])
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("cluster replica %s: CLUSTER REPLICATE %s: %w (%v)", s.Addr, c.Nodes[i].Addr, err, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	for i := range c.Nodes {
		if err := c.waitReplica(ctx, i); err != nil {
			return nil, err
		}
	}
	// A dead master is replaced after the node timeout: short, so that a
	// test of it is.
	for _, n := range c.all() {
		if err := do(ctx, n.Addr, "CONFIG", "SET", "cluster-node-timeout", strconv.Itoa(int(ReplicatedNodeTimeout.Milliseconds()))); err != nil {
			return nil, fmt.Errorf("cluster node %s: CONFIG SET cluster-node-timeout: %w", n.Addr, err)
		}
	}
	ok = true
	return c, nil
}

// ReplicatedNodeTimeout is the cluster-node-timeout of a ReplicatedCluster:
// a master that does not answer for that long is failing, and its replica
// takes over.
const ReplicatedNodeTimeout = 2 * time.Second

// Kill kills Nodes[i] outright (SIGKILL) and waits, a minute at most,
// until every other node says that Replicas[i] owns its slots, which the
// replica takes after ReplicatedNodeTimeout; it then swaps Nodes[i] and
// Replicas[i]. The killed node is down until Rejoin.
func (c *ReplicatedCluster) Kill(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dead, replica := c.Nodes[i], c.Replicas[i]
	id, err := nodeID(ctx, replica.Addr)
	if err != nil {
		return err
	}
	if err := dead.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	dead.Stop() // reaped
	c.Nodes[i], c.Replicas[i] = replica, dead
	for _, n := range c.all() {
		if n == dead {
			continue
		}
		for {
			err := ownsSlot(ctx, n.Addr, id, c.Slots[i][0])
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("after killing master %d, node %s: %w (%v)", i, n.Addr, err, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// Rejoin restarts Replicas[i], killed by Kill, on its port and its
// nodes.conf with an empty dataset: it learns that it lost its slots and
// becomes the new master's replica. Rejoin waits, a minute at most, until
// it is in sync and every node lists it.
func (c *ReplicatedCluster) Rejoin(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Replicas[i].Restart(); err != nil {
		return err
	}
	return c.waitReplica(ctx, i)
}

// waitReplica waits until Replicas[i] is in sync with Nodes[i] and every
// node lists it as an online replica.
func (c *ReplicatedCluster) waitReplica(ctx context.Context, i int) error {
	if err := WaitInSync(ctx, c.Replicas[i].Addr); err != nil {
		return err
	}
	id, err := nodeID(ctx, c.Replicas[i].Addr)
	if err != nil {
		return err
	}
	key, err := keyOn(ctx, c.Nodes[i].Addr, c.Slots[i])
	if err != nil {
		return err
	}
	if err := WaitAcked(ctx, c.Nodes[i].Addr, key); err != nil {
		return err
	}
	for _, n := range c.all() {
		for {
			err := listsReplica(ctx, n.Addr, id)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster node %s: %w (%v)", n.Addr, err, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// all returns every node, masters and replicas.
func (c *ReplicatedCluster) all() []*Server {
	return append(append([]*Server(nil), c.Nodes...), c.Replicas...)
}

// Close stops every node and removes their directories.
func (c *ReplicatedCluster) Close() {
	for _, n := range c.Replicas {
		n.Close()
	}
	c.Cluster.Close()
}

// Failover makes Replicas[i] the master of Nodes[i]'s slots by CLUSTER
// FAILOVER (coordinated: the master pauses its clients until the replica
// has caught up), waits, a minute at most, until every node agrees and
// the old master is an in-sync replica of the new one, and swaps
// Nodes[i] and Replicas[i].
func (c *ReplicatedCluster) Failover(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	replica := c.Replicas[i]
	cl := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	defer cl.Close()
	if err := cl.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER on %s: %w", replica.Addr, err)
	}
	c.Nodes[i], c.Replicas[i] = replica, c.Nodes[i]
	id, err := nodeID(ctx, replica.Addr)
	if err != nil {
		return err
	}
	for _, n := range c.all() {
		for {
			err := ownsSlot(ctx, n.Addr, id, c.Slots[i][0])
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("after CLUSTER FAILOVER, node %s: %w (%v)", n.Addr, err, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return c.waitReplica(ctx, i)
}

// keyOn returns a key of the slot range r (CLUSTER KEYSLOT, asked of the
// node at addr).
func keyOn(ctx context.Context, addr string, r [2]int) (string, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	for j := 0; ; j++ {
		key := "testredis:acked:" + strconv.Itoa(j)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return "", err
		}
		if int(slot) >= r[0] && int(slot) <= r[1] {
			return key, nil
		}
	}
}

// do sends one command to the server at addr.
func do(ctx context.Context, addr string, args ...any) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	return cl.Do(ctx, args...).Err()
}

func nodeID(ctx context.Context, addr string) (string, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return "", fmt.Errorf("cluster node %s: CLUSTER MYID: %w", addr, err)
	}
	return id, nil
}

// listsReplica reports an error unless the node at addr lists the node id
// as an online replica.
func listsReplica(ctx context.Context, addr, id string) error {
	nodes, err := clusterNodes(ctx, addr)
	if err != nil {
		return err
	}
	for _, line := range nodes {
		f := strings.Fields(line)
		if len(f) >= 8 && f[0] == id && strings.Contains(f[2], "slave") && !strings.Contains(f[2], "fail") && f[7] == "connected" {
			return nil
		}
	}
	return fmt.Errorf("CLUSTER NODES does not list %s as a connected replica yet", id)
}

// ownsSlot reports an error unless the node at addr says the master id
// owns slot.
func ownsSlot(ctx context.Context, addr, id string, slot int) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		return err
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int64(slot) < r.Start || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" && n.Health == "online" {
					if n.ID == id {
						return nil
					}
					return fmt.Errorf("slot %d still owned by %s", slot, n.ID)
				}
			}
		}
	}
	return fmt.Errorf("slot %d has no online master yet", slot)
}

func clusterNodes(ctx context.Context, addr string) ([]string, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	s, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSpace(s), "\n"), nil
}
