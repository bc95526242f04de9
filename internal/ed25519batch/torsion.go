package ed25519batch

import (
	"crypto/rand"
	"sync"

	"github.com/oasisprotocol/curve25519-voi/curve"
)

// torsionTests is the number of random subset sums torsionFreeAll tests:
// a point with a small-order component escapes all of them with
// probability at most 2^-torsionTests.
const torsionTests = 128

// TorsionFree reports whether every point lies in the prime-order
// subgroup, wrong with probability at most 2^-128 (torsionFreeAll, on one
// goroutine). Verifiers with their own batch equation use it to admit
// signatures the way this package does.
func TorsionFree(points []curve.EdwardsPoint) bool {
	return torsionFreeAll([][]curve.EdwardsPoint{points}, 1)
}

// torsionFreeAll reports whether every point lies in the prime-order
// subgroup, spreading the work over up to workers goroutines. For more
// than torsionTests points it multiplies random subset sums by the group
// order L instead of each point: writing each point as p + t with p of
// order L and t in the 8-torsion, [L](Σ b_i P_i) = [5](Σ b_i t_i) since
// L ≡ 5 mod 8, and for any nonzero t_j the sum is zero for at most half
// of the choices of b_j. At least torsionTests independent subset sums are
// tested, so a false true is returned with probability at most 2^-128,
// the bound the batch equation itself has.
//
// The subset sums are computed w at a time with buckets: in each window
// every point draws a random w-bit value and is added to that value's
// bucket; subset sum b of the window is the sum of the buckets whose value
// has bit b set. Windows are independent, so workers share them out.
//
// The points come in parts (one per decoding goroutine), read in place.
func torsionFreeAll(parts [][]curve.EdwardsPoint, workers int) bool {
	n := 0
	for _, points := range parts {
		n += len(points)
	}
	if n <= torsionTests {
		for _, points := range parts {
			for i := range points {
				if !points[i].IsTorsionFree() {
					return false
				}
			}
		}
		return true
	}
	w := bucketWidth(n)
	windows := (torsionTests + w - 1) / w
	workers = max(1, min(workers, windows))
	var wg sync.WaitGroup
	ok := make([]bool, workers)
	for k := range workers {
		lo, hi := k*windows/workers, (k+1)*windows/workers
		wg.Go(func() { ok[k] = subsetSumsTorsionFree(parts, n, w, hi-lo) })
	}
	wg.Wait()
	for _, o := range ok {
		if !o {
			return false
		}
	}
	return true
}

// subsetSumsTorsionFree tests the w subset sums of each of windows
// windows of fresh random bits.
func subsetSumsTorsionFree(parts [][]curve.EdwardsPoint, n, w, windows int) bool {
	draws := make([]byte, 2*n)
	buckets := make([]curve.EdwardsPoint, 1<<w)
	var sum curve.EdwardsPoint
	for range windows {
		if _, err := rand.Read(draws); err != nil {
			return false
		}
		for v := range buckets {
			buckets[v].Identity()
		}
		d := draws
		for _, points := range parts {
			for i := range points {
				v := (int(d[0]) | int(d[1])<<8) & (1<<w - 1)
				if v != 0 {
					buckets[v].Add(&buckets[v], &points[i])
				}
				d = d[2:]
			}
		}
		// Subset sum b is the sum of the buckets of values with bit b set.
		// From the top bit down: sum the upper half of the live buckets,
		// then fold it onto the lower half (values that share their lower
		// bits), so that every bit costs about twice its buckets.
		for b := w - 1; b >= 0; b-- {
			half := 1 << b
			sum.Identity()
			for v := half; v < 2*half; v++ {
				sum.Add(&sum, &buckets[v])
			}
			if !sum.IsTorsionFree() {
				return false
			}
			for v := 0; v < half; v++ {
				buckets[v].Add(&buckets[v], &buckets[v+half])
			}
		}
	}
	return true
}

// bucketWidth chooses the window width w that minimizes the additions
// ⌈torsionTests/w⌉·(n + 2^(w+1)).
func bucketWidth(n int) int {
	best, bestCost := 1, -1
	for w := 1; w <= 12; w++ {
		windows := (torsionTests + w - 1) / w
		cost := windows * (n + 1<<(w+1))
		if bestCost < 0 || cost < bestCost {
			best, bestCost = w, cost
		}
	}
	return best
}
