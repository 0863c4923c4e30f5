package unitlog

import "testing"

// TestRefund: units go newest first, the entry where the refund stops
// keeps its older units, and units at or before floor never go.
func TestRefund(t *testing.T) {
	var g Log
	g.Record(0, 2)
	g.Record(100, 2)
	g.Record(200, 1)
	const floor = -1 // everything counts
	if got := g.Refund(floor, 2); got != 2 {
		t.Fatalf("Refund(2) = %d, want 2", got)
	}
	if g.Len() != 2 || g.Count(floor) != 3 {
		t.Fatalf("after Refund(2): %d entries, %d units; want 2 entries, 3 units", g.Len(), g.Count(floor))
	}
	if at := g.Leaves(floor, 3); at != 100 {
		t.Errorf("the 3rd unit is at %d, want 100 (the entry kept 1 of its 2 units)", at)
	}
	// at floor 0 the t=0 entry has left: only the t=100 unit can go
	if got := g.Refund(0, 5); got != 1 {
		t.Errorf("Refund(5) with floor 0 = %d, want 1 (the units at or before floor stay)", got)
	}
	if g.Len() != 1 || g.Count(-1) != 2 {
		t.Errorf("after Refund(5) at floor 0: %d entries, %d units; want the t=0 entry of 2 units", g.Len(), g.Count(-1))
	}
	if got := g.Refund(-1, 10); got != 2 || g.Len() != 0 {
		t.Errorf("Refund(10) = %d leaving %d entries, want 2 leaving 0", got, g.Len())
	}
	if t2 := g.Record(300, 1); t2 != 300 || g.Count(-1) != 1 {
		t.Errorf("a record after emptying the log: at %d, %d units; want 300, 1", t2, g.Count(-1))
	}
}
