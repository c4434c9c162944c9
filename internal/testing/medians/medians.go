// Package medians is the one median the benchmarks report: machines here
// are noisy, so a benchmark prints medians of interleaved rounds and their
// ratios, never a mean.
package medians

import "slices"

type number interface {
	~int | ~int64 | ~float64
}

// Of is the median of v (the mean of the middle two for an even count);
// v is not changed. Of panics on an empty v: a benchmark that measured
// nothing has no median.
func Of[T number](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
