package batch

// Queued returns how many calls wait in c's queues, and how many of them
// their callers have left.
func (c *Client) Queued() (calls, dropped int) {
	c.lanesMu.RLock()
	defer c.lanesMu.RUnlock()
	for _, l := range c.lanes {
		l.mu.Lock()
		calls += len(l.queue)
		dropped += l.dropped
		l.mu.Unlock()
	}
	return calls, dropped
}
