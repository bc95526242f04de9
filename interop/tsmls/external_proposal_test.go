package tsmls_test

import (
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/interop/tsmls"
)

// groupInfo is rob's GroupInfo as an MLSMessage, with the ratchet tree.
func (m *rgMember) groupInfo(t *testing.T) []byte {
	t.Helper()
	gi, err := m.g.GroupInfo(true)
	if err != nil {
		t.Fatal(err)
	}
	return encode(t, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireGroupInfo, GroupInfo: gi})
}

// TestInteropTSMLSNewMemberProposal (RFC 9420 §12.1.8) against ts-mls
// 1.6.4: a ts-mls joiner signs its own Add (new_member_proposal) from
// regroup's GroupInfo; regroup and the ts-mls member cache it, regroup
// commits it by reference, the ts-mls member follows and the joiner joins
// from the Welcome.
func TestInteropTSMLSNewMemberProposal(t *testing.T) {
	d, s, sc := resumeScenario(t)
	ctx := sc.ctx
	rob, alice := regroupWithTSMLS(sc, d, s, []byte("tsmls-new-member"))
	prop, ckp, err := d.ProposeAddExternal(ctx, rob.groupInfo(t), []byte("carol (ts-mls)"))
	if err != nil {
		t.Fatalf("ts-mls proposes its own Add: %v", err)
	}
	if m := decode(t, prop); m.Public == nil || m.Public.Content.Sender.Type != framing.SenderNewMemberProposal {
		t.Fatal("ts-mls's joiner-signed Add is not a new_member_proposal PublicMessage")
	}
	if _, err := rob.g.Process(decode(t, prop)); err != nil {
		t.Fatalf("regroup caches ts-mls's new_member_proposal: %v", err)
	}
	if _, err := alice.Process(ctx, prop); err != nil {
		t.Fatalf("ts-mls caches its joiner's proposal: %v", err)
	}
	commit, welcome := rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, TreeInWelcome: true})
	if _, err := alice.Process(ctx, commit); err != nil {
		t.Fatalf("ts-mls follows the commit of the joiner's Add: %v", err)
	}
	carol, err := d.Join(ctx, ckp, welcome)
	if err != nil {
		t.Fatalf("the ts-mls joiner joins: %v", err)
	}
	sc.agree("joiner-signed Add committed by regroup", 2, []*rgMember{rob}, []*tsmls.Member{alice, carol})
	sc.messages("after the joiner-signed Add", []*rgMember{rob}, []*tsmls.Member{alice, carol})
}

// TestTSMLSExternalSendersAsOneSender shows a ts-mls 1.6.4 quirk: it
// decodes the external_senders group context extension as one
// ExternalSender, not as RFC 9420's vector ExternalSender
// external_senders<V> (§12.1.8.1), and its proposeExternal takes the
// extension's position among the group context extensions as
// sender_index. So ts-mls refuses a commit that installs external_senders
// in the RFC encoding (and could not sign an external proposal for such a
// group): external senders do not interoperate with ts-mls 1.6.4.
// regroup's external senders are tested in adapters/mls/group and, through
// the mlswg harness scripts, in cmd/mls-interop-client.
func TestTSMLSExternalSendersAsOneSender(t *testing.T) {
	d, s, sc := resumeScenario(t)
	rob, alice := regroupWithTSMLS(sc, d, s, []byte("tsmls-external-senders"))
	_, pub, err := s.GenerateSignatureKey()
	if err != nil {
		t.Fatal(err)
	}
	es, err := codec.Marshal(message.ExternalSenders{{SignatureKey: pub, Credential: message.Credential{Type: message.CredentialBasic, Identity: []byte("ds")}}})
	if err != nil {
		t.Fatal(err)
	}
	commit, _ := rob.commit(t, &group.CommitOptions{WireFormat: sc.wf, Proposals: []*message.Proposal{{Type: message.ProposalGroupContextExtensions,
		GroupContextExtensions: &message.GroupContextExtensions{Extensions: message.Extensions{{Type: message.ExtExternalSenders, Data: es}}}}}})
	_, err = alice.Process(sc.ctx, commit)
	if err == nil || !strings.Contains(err.Error(), "Could not decode external_senders") {
		t.Fatalf("ts-mls processes a commit installing RFC external_senders: %v, want its one-sender decoder to fail", err)
	}
	t.Logf("ts-mls 1.6.4 quirk, as documented: %s", firstLine(err.Error()))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
