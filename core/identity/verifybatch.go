package identity

import (
	"runtime"
	"sync"

	"github.com/regroup-mls/regroup/internal/ed25519batch"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// verifyUpdates returns [VerifyUpdate]'s answer for each update, verifying
// the signatures of all of them in one Ed25519ctx batch (COMP-580). The
// batch accepts exactly the signatures crypto/ed25519 accepts; an update
// with a signature it refuses (a key [edkey] refuses included) is
// verified again on its own with VerifyUpdate, so its error names the
// failed check exactly as VerifyUpdate alone does.
func verifyUpdates(us []*identitypb.IdentityUpdate) []error {
	errs := make([]error, len(us))
	sigs := make([][]signature, len(us))
	usable := make([]bool, len(us)) // every signature verifies
	// The checks before the signatures (hashes, encodings) are spread
	// over the cores like the batch itself.
	parts(len(us), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sigs[i], errs[i] = updateSignatures(us[i])
			usable[i] = errs[i] == nil
		}
	})
	var checks []ed25519batch.Check
	var owner []int // the update of each check
	for i := range us {
		if !usable[i] {
			continue
		}
		for _, s := range sigs[i] {
			// RefuseWeakKey: the keys edkey refuses prove nothing (COMP-320),
			// as in verify.
			checks = append(checks, ed25519batch.Check{PublicKey: s.key, Message: s.msg, Signature: s.sig,
				Context: UpdateContext, RefuseWeakKey: true})
			owner = append(owner, i)
		}
	}
	ok := ed25519batch.Verify(checks)
	for j, good := range ok {
		if !good {
			usable[owner[j]] = false
		}
	}
	for i, u := range us {
		if errs[i] == nil && !usable[i] {
			errs[i] = VerifyUpdate(u) // one by one: the error names the failed signature
		}
	}
	return errs
}

// parts runs fn over [0, n) split into up to runtime.GOMAXPROCS(0)
// ranges of at least minPart, at once, and returns when all have returned.
func parts(n int, fn func(lo, hi int)) {
	const minPart = 32
	workers := max(1, min(runtime.GOMAXPROCS(0), n/minPart))
	if workers == 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := range workers {
		lo, hi := k*n/workers, (k+1)*n/workers
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}
