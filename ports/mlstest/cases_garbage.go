package mlstest

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/regroup-mls/regroup/ports"
)

// hostile returns inputs derived from valid messages: nothing, random
// bytes, every prefix at up to samples positions, and the messages with
// one byte inverted at up to samples positions. The leading two bytes,
// the MLSMessage version, are not inverted: testUnknownVersion covers
// them.
func hostile(r *rand.Rand, samples int, valid ...[]byte) map[string][]byte {
	in := map[string][]byte{"nil": nil, "empty": {}}
	for i := range 8 {
		b := make([]byte, 1+r.IntN(300))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		in[fmt.Sprintf("random %d", i)] = b
	}
	for k, msg := range valid {
		step := max(1, len(msg)/samples)
		for i := 0; i < len(msg); i += step {
			in[fmt.Sprintf("message %d cut at %d", k, i)] = msg[:i]
			if i >= 2 {
				in[fmt.Sprintf("message %d byte %d flipped", k, i)] = flip(msg, i)
			}
		}
	}
	return in
}

// guard runs fn and turns a panic into a failure of the case.
func (e *env) guard(what string, fn func() error) (err error) {
	e.t.Helper()
	defer func() {
		if r := recover(); r != nil {
			e.t.Fatalf("%s panicked: %v", what, r)
		}
	}()
	return fn()
}

// testGarbage: truncated, altered and random messages never panic, always
// fail with exactly one class, and leave the group as it was; the intact
// messages then process. Welcomes and key packages altered the same way
// are refused without a panic.
func testGarbage(e *env) {
	gid, a, b := e.twoMembers("garbage")
	ct := a.encrypt(gid, "intact", "aad")
	out, _ := a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	before := b.mustView(gid)
	r := rand.New(rand.NewPCG(1, 2))
	for name, msg := range hostile(r, 24, ct, out.Commit) {
		err := e.guard("Process of "+name, func() error { _, err := b.process(gid, msg); return err })
		if err == nil {
			e.t.Fatalf("Process accepted %s", name)
		}
		if _, why := classOf(err); why != nil {
			e.t.Fatalf("Process of %s: %v", name, why)
		}
	}
	b.unchanged("hostile messages", gid, before)
	b.receive(gid, ct, a, "intact", "aad")

	c := e.newMember("c")
	kp := c.keyPackage()
	add, _ := a.commitAndMerge(gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	for name, w := range hostile(r, 16, add.Welcome) {
		err := e.guard("StageWelcome of "+name, func() error {
			return c.tx(func(ctx context.Context, tx ports.Tx) error {
				_, err := c.mls.StageWelcome(ctx, tx, w, record(kp))
				return err
			})
		})
		if err == nil {
			e.t.Fatalf("StageWelcome accepted %s", name)
		}
	}
	for name, k := range hostile(r, 16, kp.KeyPackage) {
		err := e.guard("ValidateKeyPackage of "+name, func() error {
			_, err := c.mls.ValidateKeyPackage(e.ctx, k, ports.ValidateOptions{})
			return err
		})
		if err == nil {
			e.t.Fatalf("ValidateKeyPackage accepted %s", name)
		}
	}
	b.applyCommit(gid, out.Commit)
	b.applyCommit(gid, add.Commit)
	c.join(add.Welcome, kp, a)
	agree(gid, 3, a, b, c)
}
