package am

import "testing"

// TestStill: Quiesce's rule. A balanced first round is not enough (a
// message counted as sent by a rank that read early can offset one
// handled at a rank that read late); two equal balanced rounds are; equal
// but unbalanced rounds (messages in flight) and balanced rounds that
// differ (the job moved in between) are not.
func TestStill(t *testing.T) {
	for _, c := range []struct {
		prev, sums []int64
		round      int
		want       bool
	}{
		{[]int64{0, 0, 0}, []int64{1, 1, 2}, 0, false},
		{[]int64{1, 1, 2}, []int64{1, 1, 2}, 1, true},
		{[]int64{1, 1, 1}, []int64{1, 1, 1}, 3, false},
		{[]int64{1, 1, 2}, []int64{2, 1, 3}, 2, false},
		{[]int64{0, 0, 0}, []int64{0, 0, 0}, 1, true},
	} {
		if got := still(c.prev, c.sums, c.round); got != c.want {
			t.Errorf("still(%v, %v, round %d) = %v, want %v", c.prev, c.sums, c.round, got, c.want)
		}
	}
}
