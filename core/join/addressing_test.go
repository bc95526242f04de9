package join_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// JOIN-090, third sentence: a member processing a commit does not reject
// it because a key package it adds fails JOIN-090 (here, a 0xff03
// extension naming a wrapper algorithm no one defines): the joiner, a
// member by then, applies the commit with the real engine and reaches the
// adder's epoch and membership.
func TestJOIN090_MemberAppliesCommitAddingUnaddressablePackage(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{})
	_, seq := g.join(j, addSpec{})
	j.process()
	j.want(seq, "joined")

	_, priv, _ := ed25519.GenerateKey(nil)
	wrapper := mustMarshal(&contentspb.WelcomeWrapperEncryption{PubKey: make([]byte, 32), Algorithm: contentspb.WelcomeWrapperAlgorithm(7)})
	now := w.clock.Now()
	bad, err := a.eng.CreateKeyPackage(w.ctx, ports.KeyPackageOptions{
		Credential:          mustMarshal(&contentspb.MlsCredential{InboxId: "an inbox nobody can address"}),
		SignaturePrivateKey: priv.Seed(), NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		Extensions:           []ports.Extension{{Type: 0xff03, Data: wrapper}},
		CapabilityExtensions: keypackage.CapabilityExtensions(), CapabilityProposals: keypackage.CapabilityProposals()})
	if err != nil {
		t.Fatal(err)
	}
	g.add(addSpec{extra: [][]byte{bad.KeyPackage}})
	if err := j.catchUp(w.ctx, g.id); err != nil {
		t.Fatal(err)
	}
	av, _ := a.view(g.id)
	jv, _ := j.view(g.id)
	if j.failures != 0 || jv.Epoch != av.Epoch || len(jv.Members) != len(av.Members) || len(jv.Members) != 3 {
		t.Fatalf("member: %d failures, epoch %d with %d members; adder: epoch %d with %d members",
			j.failures, jv.Epoch, len(jv.Members), av.Epoch, len(av.Members))
	}
}
