package mls_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
)

// publicV1 holds a public state of version 1 (COMP-312) recorded by
// TestRecordPublicStateV1, with a commit for its epoch and the GroupInfo
// of the epoch that commit leads to, one hex line each.
const publicV1 = "testdata/public-state-v1.txt"

// TestRecordPublicStateV1 writes publicV1; it runs only when
// REGROUP_RECORD_STATE is set.
func TestRecordPublicStateV1(t *testing.T) {
	if os.Getenv("REGROUP_RECORD_STATE") == "" {
		t.Skip("set REGROUP_RECORD_STATE=1 to record " + publicV1)
	}
	s := newPublicSeed(t)
	out := fmt.Sprintf("state %x\ncommit %x\ngroupinfo %x\n", s.state, s.commit, s.nextGroupInfo)
	if err := os.WriteFile(publicV1, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCOMP312_RecordedPublicStateV1Loads: a public state recorded in
// version 1 still decodes, follows the commit recorded with it, and the
// recorded GroupInfo of the next epoch checks against the result.
func TestCOMP312_RecordedPublicStateV1Loads(t *testing.T) {
	raw, err := os.ReadFile(publicV1)
	if err != nil {
		t.Fatal(err)
	}
	rec := map[string][]byte{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		if rec[k], err = hex.DecodeString(v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	ctx := context.Background()
	// No cache: the state is read from its bytes.
	pub := mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: -1})
	pc, err := pub.Apply(ctx, rec["state"], rec["commit"])
	if err != nil {
		t.Fatalf("Apply on the recorded state: %v", err)
	}
	if pc.Epoch != 1 || pc.Next.View.Epoch != 2 || len(pc.Next.View.Members) != 2 {
		t.Fatalf("recorded commit: epoch %d, next %d with %d members", pc.Epoch, pc.Next.View.Epoch, len(pc.Next.View.Members))
	}
	if err := pub.CheckGroupInfo(ctx, pc.Next.State, rec["groupinfo"]); err != nil {
		t.Fatalf("recorded GroupInfo: %v", err)
	}
}
