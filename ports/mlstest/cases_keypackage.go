package mlstest

import (
	"bytes"
	"errors"
	"slices"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

var keyPackageCases = []testCase{
	{"JOIN-007/CreatedKeyPackageValidates", testKeyPackageRoundTrip},
	{"JOIN-007/TamperedKeyPackageFails", testKeyPackageTampered},
	{"JOIN-008/ExpiredKeyPackageFailsOnlyWithNow", testKeyPackageLifetime},
}

var pastEpochCases = []testCase{
	{"PastEpochs/LateMessageWithinWindowDecrypts", testPastWithin},
	{"PastEpochs/LateMessageBeyondWindowIsWrongEpoch", testPastBeyond},
	{"PastEpochs/PastEpochKeysSurviveRestart", testPastRestart},
	{"PastEpochs/LateMessageNamesItsSenderOfThatEpoch", testPastSender},
}

// testKeyPackageRoundTrip: a created key package validates, with the
// lifetime check, to what it was created from.
func testKeyPackageRoundTrip(e *env) {
	a := e.newMember("a")
	opts := a.keyPackageOptions()
	b, err := a.mls.CreateKeyPackage(e.ctx, opts)
	if err != nil {
		e.t.Fatalf("CreateKeyPackage: %v", err)
	}
	v, err := a.mls.ValidateKeyPackage(e.ctx, b.KeyPackage, ports.ValidateOptions{Now: time.Now()})
	if err != nil {
		e.t.Fatalf("ValidateKeyPackage of a created key package: %v", err)
	}
	switch {
	case !bytes.Equal(v.Ref, b.Ref):
		e.t.Fatalf("validated ref %x, created ref %x", v.Ref, b.Ref)
	case !bytes.Equal(v.SignatureKey, a.pub):
		e.t.Fatalf("validated signature key %x, want %x", v.SignatureKey, a.pub)
	case !bytes.Equal(v.Credential, opts.Credential):
		e.t.Fatalf("validated credential %x, want %x", v.Credential, opts.Credential)
	case len(v.InitKey) == 0 || v.CipherSuite == 0:
		e.t.Fatalf("validated init key %x, cipher suite %d", v.InitKey, v.CipherSuite)
	case !v.NotBefore.Equal(opts.NotBefore.Truncate(time.Second)) || !v.NotAfter.Equal(opts.NotAfter.Truncate(time.Second)):
		e.t.Fatalf("validated lifetime %v..%v, want %v..%v", v.NotBefore, v.NotAfter, opts.NotBefore, opts.NotAfter)
	}
}

// testKeyPackageTampered: a key package with its signature, its init key
// or its credential altered fails validation with ErrInvalid (JOIN-007).
func testKeyPackageTampered(e *env) {
	a := e.newMember("a")
	b := a.keyPackage()
	v, err := a.mls.ValidateKeyPackage(e.ctx, b.KeyPackage, ports.ValidateOptions{})
	if err != nil {
		e.t.Fatalf("ValidateKeyPackage: %v", err)
	}
	tampered := map[string][]byte{"signature": flip(b.KeyPackage, len(b.KeyPackage)-1)}
	if i := bytes.Index(b.KeyPackage, v.InitKey); i >= 0 {
		tampered["init key"] = flip(b.KeyPackage, i+len(v.InitKey)/2)
	}
	if i := bytes.Index(b.KeyPackage, []byte(a.inbox)); i >= 0 {
		tampered["credential"] = flip(b.KeyPackage, i)
	}
	if len(tampered) != 3 {
		e.t.Fatal("the key package does not hold its init key and credential as bytes")
	}
	for what, kp := range tampered {
		if _, err := a.mls.ValidateKeyPackage(e.ctx, kp, ports.ValidateOptions{}); !errors.Is(err, ports.ErrInvalid) {
			e.t.Errorf("key package with its %s altered: %v, want ErrInvalid", what, err)
		}
	}
}

// testKeyPackageLifetime: with ValidateOptions.Now outside the lifetime a
// key package fails with ErrInvalid (JOIN-008); without Now the lifetime
// is not checked.
func testKeyPackageLifetime(e *env) {
	a := e.newMember("a")
	opts := a.keyPackageOptions()
	b, err := a.mls.CreateKeyPackage(e.ctx, opts)
	if err != nil {
		e.t.Fatalf("CreateKeyPackage: %v", err)
	}
	for what, now := range map[string]time.Time{
		"after NotAfter":   opts.NotAfter.Add(time.Hour),
		"before NotBefore": opts.NotBefore.Add(-time.Hour),
	} {
		if _, err := a.mls.ValidateKeyPackage(e.ctx, b.KeyPackage, ports.ValidateOptions{Now: now}); !errors.Is(err, ports.ErrInvalid) {
			e.t.Errorf("validated %s: %v, want ErrInvalid", what, err)
		}
	}
	if _, err := a.mls.ValidateKeyPackage(e.ctx, b.KeyPackage, ports.ValidateOptions{}); err != nil {
		e.t.Errorf("without Now the lifetime is not checked, but validation failed: %v", err)
	}
}

func (e *env) needPastEpochs() int {
	if !e.caps.BoundedPastEpochs {
		e.t.Skip("harness does not declare Caps.BoundedPastEpochs: the number of past epochs kept for late messages is unknown")
	}
	return e.caps.PastEpochs
}

// lateMessage sends a message from b at epoch 1, then a commits n times
// and processes it at epoch 1+n, after restarting when restart is set.
func (e *env) lateMessage(label string, n int, restart bool) (ports.Processed, *member, error) {
	gid, a, b := e.twoMembers(label)
	ct := b.encrypt(gid, "late", "")
	for range n {
		a.commitAndMerge(gid, ports.CommitOptions{ForcePath: true})
	}
	if restart {
		a.restart()
	}
	p, err := a.process(gid, ct)
	return p, b, err
}

// testPastWithin: a message of an epoch PastEpochs epochs back decrypts.
func testPastWithin(e *env) {
	n := e.needPastEpochs()
	p, b, err := e.lateMessage("past-within", n, false)
	if err != nil {
		e.t.Fatalf("message of %d epochs back, with %d past epochs kept: %v", n, n, err)
	}
	if p.Kind != ports.ProcessedApplication || string(p.Application) != "late" || p.Sender.InboxID != b.inbox {
		e.t.Fatalf("late message: kind %d %q from %q", p.Kind, p.Application, p.Sender.InboxID)
	}
}

// testPastBeyond: a message of an epoch PastEpochs+1 epochs back is a
// wrong-epoch failure, relation older.
func testPastBeyond(e *env) {
	n := e.needPastEpochs() + 1
	_, _, err := e.lateMessage("past-beyond", n, false)
	e.wantEpoch("message beyond the kept past epochs", err, ports.EpochOlder, 1, uint64(1+n))
}

// testPastSender: a late message names the member who sent it, as its
// epoch's tree has it, even when a later commit removed that member and gave
// its leaf to another: attributing it to the leaf's new holder would show a
// message under the wrong identity.
func testPastSender(e *env) {
	if e.needPastEpochs() < 1 {
		e.t.Skip("harness keeps no past epochs")
	}
	gid, a, b := e.twoMembers("past-sender")
	ct := b.encrypt(gid, "late", "")
	c := e.newMember("c")
	kp := c.keyPackage()
	_, v := a.commitAndMerge(gid, ports.CommitOptions{Remove: []uint32{1}, Add: [][]byte{kp.KeyPackage}})
	if !slices.ContainsFunc(v.Members, func(m ports.Member) bool { return m.LeafIndex == 1 && m.InboxID == c.inbox }) {
		e.t.Fatalf("c was not added at b's former leaf 1 (RFC 9420 §12.1.1: the leftmost blank leaf): %+v", v.Members)
	}
	p, err := a.process(gid, ct)
	if err != nil {
		e.t.Fatalf("late message of the epoch before b's removal: %v", err)
	}
	if p.Sender.LeafIndex != 1 || p.Sender.InboxID != b.inbox || !bytes.Equal(p.Sender.SignatureKey, b.pub) {
		e.t.Fatalf("late message attributed to leaf %d, inbox %q, key %x; want b (%q, %x)", p.Sender.LeafIndex, p.Sender.InboxID, p.Sender.SignatureKey, b.inbox, b.pub)
	}
}

// testPastRestart: the keys of retained past epochs are state like any
// other: a late message of an epoch PastEpochs back decrypts after the
// receiver restarts.
func testPastRestart(e *env) {
	n := e.needPastEpochs()
	p, b, err := e.lateMessage("past-restart", n, true)
	if err != nil {
		e.t.Fatalf("message of %d epochs back after a restart: %v", n, err)
	}
	if string(p.Application) != "late" || p.Sender.InboxID != b.inbox {
		e.t.Fatalf("late message after a restart: %q from %q", p.Application, p.Sender.InboxID)
	}
}
