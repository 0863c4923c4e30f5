package testredis

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestCluster starts a cluster, writes keys through a cluster client and
// checks they land on every master, as the slot map says.
func TestCluster(t *testing.T) {
	start := time.Now()
	c := StartCluster(t)
	t.Logf("cluster of %d masters ready in %v", len(c.Nodes), time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	cc := c.Client(t)
	seen := map[int]bool{}
	for i := 0; i < 30; i++ {
		key := "k" + strconv.Itoa(i)
		if err := cc.Set(ctx, key, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		slot, err := cc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		n := c.NodeOf(int(slot))
		if n < 0 {
			t.Fatalf("slot %d of %s has no master", slot, key)
		}
		seen[n] = true
		// the key is on that master's process, read directly
		direct := c.Nodes[n].Client(t)
		if got, err := direct.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s on node %d = %d, %v; want %d", key, n, got, err, i)
		}
	}
	if len(seen) != ClusterMasters {
		t.Fatalf("30 keys landed on %d masters, want %d", len(seen), ClusterMasters)
	}
	c.Close()
	for _, n := range c.Nodes {
		if conn, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("node %s still accepts connections after Close", n.Addr)
		}
	}
}

// TestReplicatedCluster starts a cluster with a replica per master and
// fails one master over by command: the replica takes its slots, the old
// master follows it.
func TestReplicatedCluster(t *testing.T) {
	start := time.Now()
	c := StartReplicatedCluster(t)
	t.Logf("started in %v", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	cc := c.Client(t)
	if err := cc.Set(ctx, "{k}", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := c.Nodes[0]
	start = time.Now()
	if err := c.Failover(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("failed over in %v", time.Since(start).Round(time.Millisecond))
	if c.Replicas[0] != old {
		t.Errorf("after Failover, Replicas[0] = %s, want the old master %s", c.Replicas[0].Addr, old.Addr)
	}
	if err := serverIsMaster(ctx, c.Nodes[0].Addr); err != nil {
		t.Error(err)
	}
}
