package commitlog

import (
	"crypto/rand"

	"github.com/oasisprotocol/curve25519-voi/curve"
)

// torsionTests is the number of random subset sums torsionFreeAll tests:
// a point with a small-order component escapes all of them with
// probability at most 2^-torsionTests.
const torsionTests = 128

// torsionFreeAll reports whether every point lies in the prime-order
// subgroup. For more than torsionTests points it multiplies random subset
// sums by the group order L instead of each point: writing each point as
// p + t with p of order L and t in the 8-torsion, [L](Σ b_i P_i) =
// [5](Σ b_i t_i) since L ≡ 5 mod 8, and for any nonzero t_j the sum is
// zero for at most half of the choices of b_j. At least torsionTests
// independent subset sums are tested, so a false true is returned with
// probability at most 2^-128, the bound the batch equation itself has.
//
// The subset sums are computed w at a time with buckets: each point draws
// a random w-bit value per window and is added to that value's bucket;
// subset sum b of the window is the sum of the buckets whose value has
// bit b set.
func torsionFreeAll(points []curve.EdwardsPoint) bool {
	n := len(points)
	if n <= torsionTests {
		for i := range points {
			if !points[i].IsTorsionFree() {
				return false
			}
		}
		return true
	}
	w := bucketWidth(n)
	windows := (torsionTests + w - 1) / w
	draws := make([]byte, 2*n*windows)
	if _, err := rand.Read(draws); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	buckets := make([]curve.EdwardsPoint, 1<<w)
	var sum curve.EdwardsPoint
	for win := 0; win < windows; win++ {
		for v := range buckets {
			buckets[v].Identity()
		}
		for i := range points {
			at := 2 * (win*n + i)
			v := (int(draws[at]) | int(draws[at+1])<<8) & (1<<w - 1)
			if v != 0 {
				buckets[v].Add(&buckets[v], &points[i])
			}
		}
		for b := 0; b < w; b++ {
			sum.Identity()
			for v := 1; v < 1<<w; v++ {
				if v>>b&1 == 1 {
					sum.Add(&sum, &buckets[v])
				}
			}
			if !sum.IsTorsionFree() {
				return false
			}
		}
	}
	return true
}

// bucketWidth chooses the window width w that minimizes the additions
// (torsionTests/w)·n + torsionTests·2^(w-1).
func bucketWidth(n int) int {
	best, bestCost := 1, -1
	for w := 1; w <= 12; w++ {
		windows := (torsionTests + w - 1) / w
		cost := windows*n + windows*w*(1<<(w-1))
		if bestCost < 0 || cost < bestCost {
			best, bestCost = w, cost
		}
	}
	return best
}
