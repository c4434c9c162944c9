package medians

import (
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	if got := Of([]time.Duration{3, 1, 2}); got != 2 {
		t.Fatalf("odd: %v", got)
	}
	if got := Of([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("even: %v", got)
	}
	in := []int{3, 1, 2}
	_ = Of(in)
	if in[0] != 3 {
		t.Fatal("Of sorted its input")
	}
}
