package recovery_test

import (
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// FuzzOneshotMessage feeds the recovery the bytes of a one-shot group's
// ONESHOT_MESSAGE, decoded as the join code decodes it, from a member of
// the group or from a stranger: every input is kept as a request or
// rejected with a *join.Rejection naming a rule — never a panic, never a
// local failure that would hold the Welcome for ever — and a request
// kept names a group the readder holds and a position a store holds.
func FuzzOneshotMessage(f *testing.F) {
	w := world.New(f, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	id := group(f, alice, bob)
	seed := func(gid []byte, latest uint64) []byte {
		b, _ := proto.Marshal(&contentspb.OneshotMessage{MessageType: &contentspb.OneshotMessage_ReaddRequest{
			ReaddRequest: &contentspb.ReaddRequest{GroupId: gid, LatestCommitSequenceId: latest}}})
		return b
	}
	f.Add(seed(id, 3), true)
	f.Add(seed(id, math.MaxUint64), true)
	f.Add(seed(id[:31], 1), true)
	f.Add(seed(make([]byte, 32), 1), false)
	f.Add([]byte{}, true)
	f.Add([]byte{0x0a, 0x00}, false)
	rec := alice.C.Recovery()
	member := ports.Member{SignatureKey: key(bob), InboxID: bob.C.InboxID()}
	stranger := ports.Member{SignatureKey: make([]byte, 32), InboxID: "stranger"}
	f.Fuzz(func(t *testing.T, data []byte, fromMember bool) {
		var msg contentspb.OneshotMessage
		if proto.Unmarshal(data, &msg) != nil {
			return // the join code rejects such a group before the hook (JOIN-060)
		}
		adder := stranger
		if fromMember {
			adder = member
		}
		err := rec.OnOneshot(w.Ctx, join.Oneshot{GroupID: make([]byte, 32), Adder: adder, Message: &msg})
		var rej *join.Rejection
		switch {
		case err == nil:
			req := msg.GetReaddRequest()
			var st ports.ReaddStatus
			if err := alice.Store.Tx(w.Ctx, func(tx ports.Tx) (err error) {
				st, err = tx.Readds().Get(w.Ctx, req.GetGroupId(), adder.SignatureKey)
				return err
			}); err != nil {
				t.Fatalf("kept %+v, yet nothing is stored: %v", req, err)
			}
			if !fromMember || string(req.GetGroupId()) != string(id) || !st.Requested || st.RequestedAt > math.MaxInt64 {
				t.Fatalf("kept %+v from member=%v: %+v", req, fromMember, st)
			}
		case errors.As(err, &rej) && errors.Is(err, join.ErrRejected) && rej.Rule != "":
		default:
			t.Fatalf("OnOneshot(%x) = %v; want nil or a rejection", data, err)
		}
	})
}
