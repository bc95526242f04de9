package framing_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
)

type protectionCase struct {
	Suite                   uint16      `json:"cipher_suite"`
	GroupID                 vectors.Hex `json:"group_id"`
	Epoch                   uint64      `json:"epoch"`
	TreeHash                vectors.Hex `json:"tree_hash"`
	ConfirmedTranscriptHash vectors.Hex `json:"confirmed_transcript_hash"`
	SignaturePriv           vectors.Hex `json:"signature_priv"`
	SignaturePub            vectors.Hex `json:"signature_pub"`
	EncryptionSecret        vectors.Hex `json:"encryption_secret"`
	SenderDataSecret        vectors.Hex `json:"sender_data_secret"`
	MembershipKey           vectors.Hex `json:"membership_key"`
	Proposal                vectors.Hex `json:"proposal"`
	ProposalPriv            vectors.Hex `json:"proposal_priv"`
	ProposalPub             vectors.Hex `json:"proposal_pub"`
	Commit                  vectors.Hex `json:"commit"`
	CommitPriv              vectors.Hex `json:"commit_priv"`
	CommitPub               vectors.Hex `json:"commit_pub"`
	Application             vectors.Hex `json:"application"`
	ApplicationPriv         vectors.Hex `json:"application_priv"`
}

// env is the protection environment of one message-protection case.
type env struct {
	t     *testing.T
	c     *protectionCase
	suite *ciphersuite.Suite
	gc    []byte
}

func (e *env) tree() *secrettree.Tree {
	tr, err := secrettree.New(e.suite, e.c.EncryptionSecret, 2, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return tr
}

// body returns the encoding of the content's body for comparison.
func body(t *testing.T, f *framing.FramedContent) []byte {
	t.Helper()
	switch f.ContentType {
	case framing.ContentApplication:
		return f.Application
	case framing.ContentProposal:
		b, err := codec.Marshal(f.Proposal)
		if err != nil {
			t.Fatal(err)
		}
		return b
	default:
		b, err := codec.Marshal(f.Commit)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// checkPrivate decrypts a PrivateMessage of the vector, verifies it and
// compares its body.
func (e *env) checkPrivate(name string, msg, want []byte) *framing.AuthenticatedContent {
	t := e.t
	m, err := framing.Decode(msg)
	if err != nil || m.Private == nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	ac, err := framing.Decrypt(e.suite, m.Private, e.tree(), e.c.SenderDataSecret)
	if err != nil {
		t.Fatalf("%s: decrypt: %v", name, err)
	}
	if err := ac.Verify(e.suite, e.c.SignaturePub, e.gc); err != nil {
		t.Fatalf("%s: signature: %v", name, err)
	}
	if ac.Content.Sender.LeafIndex != 1 || !bytes.Equal(body(t, &ac.Content), want) {
		t.Fatalf("%s: content differs", name)
	}
	return ac
}

// checkPublic verifies a PublicMessage of the vector and compares its body.
func (e *env) checkPublic(name string, msg, want []byte) *framing.AuthenticatedContent {
	t := e.t
	m, err := framing.Decode(msg)
	if err != nil || m.Public == nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	ac, err := m.Public.Unprotect(e.suite, e.c.MembershipKey, e.gc)
	if err != nil {
		t.Fatalf("%s: membership tag: %v", name, err)
	}
	if err := ac.Verify(e.suite, e.c.SignaturePub, e.gc); err != nil {
		t.Fatalf("%s: signature: %v", name, err)
	}
	if !bytes.Equal(body(t, &ac.Content), want) {
		t.Fatalf("%s: content differs", name)
	}
	bad := *m.Public
	bad.MembershipTag = append([]byte{1}, bad.MembershipTag[1:]...)
	if _, err := bad.Unprotect(e.suite, e.c.MembershipKey, e.gc); !errors.Is(err, framing.ErrMembershipTag) {
		t.Fatalf("%s: forged membership tag: %v", name, err)
	}
	return ac
}

// roundTrip signs the content again and protects and unprotects it in wire
// format wf with fresh ratchets.
func (e *env) roundTrip(name string, ac *framing.AuthenticatedContent, wf framing.WireFormat) {
	t := e.t
	signed, err := framing.Sign(e.suite, wf, &ac.Content, e.c.SignaturePriv, e.gc)
	if err != nil {
		t.Fatal(err)
	}
	signed.Auth.ConfirmationTag = ac.Auth.ConfirmationTag
	var got *framing.AuthenticatedContent
	if wf == framing.WirePublicMessage {
		pm, err := framing.NewPublicMessage(e.suite, signed, e.c.MembershipKey, e.gc)
		if err != nil {
			t.Fatalf("%s: protect public: %v", name, err)
		}
		got, err = roundTripPublic(e, pm)
		if err != nil {
			t.Fatalf("%s: unprotect public: %v", name, err)
		}
	} else {
		pm, err := framing.Encrypt(e.suite, signed, e.tree(), e.c.SenderDataSecret, 17)
		if err != nil {
			t.Fatalf("%s: encrypt: %v", name, err)
		}
		b, err := codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: wf, Private: pm})
		if err != nil {
			t.Fatal(err)
		}
		m, err := framing.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = framing.Decrypt(e.suite, m.Private, e.tree(), e.c.SenderDataSecret); err != nil {
			t.Fatalf("%s: decrypt own: %v", name, err)
		}
	}
	if err := got.Verify(e.suite, e.c.SignaturePub, e.gc); err != nil {
		t.Fatalf("%s: own signature: %v", name, err)
	}
	if !bytes.Equal(body(t, &got.Content), body(t, &ac.Content)) {
		t.Fatalf("%s: own round trip differs", name)
	}
}

func roundTripPublic(e *env, pm *framing.PublicMessage) (*framing.AuthenticatedContent, error) {
	b, err := codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WirePublicMessage, Public: pm})
	if err != nil {
		return nil, err
	}
	m, err := framing.Decode(b)
	if err != nil {
		return nil, err
	}
	return m.Public.Unprotect(e.suite, e.c.MembershipKey, e.gc)
}

// TestMessageProtectionVectors runs every case of message-protection.json
// (§6.2, §6.3): it unprotects the given public and private forms, protects
// the content again and unprotects that, and checks that an application
// message cannot be a PublicMessage.
func TestMessageProtectionVectors(t *testing.T) {
	var cases []protectionCase
	vectors.Load(t, "message-protection.json", &cases)
	for i := range cases {
		c := &cases[i]
		t.Run(fmt.Sprintf("message-protection/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			gc, err := codec.Marshal(&message.GroupContext{
				Version: message.MLS10, CipherSuite: ciphersuite.ID(c.Suite), GroupID: c.GroupID, Epoch: c.Epoch,
				TreeHash: c.TreeHash, ConfirmedTranscriptHash: c.ConfirmedTranscriptHash,
			})
			if err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, c: c, suite: s, gc: gc}
			for _, m := range []struct {
				name            string
				want, priv, pub []byte
			}{
				{"proposal", c.Proposal, c.ProposalPriv, c.ProposalPub},
				{"commit", c.Commit, c.CommitPriv, c.CommitPub},
				{"application", c.Application, c.ApplicationPriv, nil},
			} {
				ac := e.checkPrivate(m.name+"_priv", m.priv, m.want)
				e.roundTrip(m.name+" as private", ac, framing.WirePrivateMessage)
				if m.pub != nil {
					e.checkPublic(m.name+"_pub", m.pub, m.want)
					e.roundTrip(m.name+" as public", ac, framing.WirePublicMessage)
					continue
				}
				signed, err := framing.Sign(s, framing.WirePublicMessage, &ac.Content, c.SignaturePriv, gc)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := framing.NewPublicMessage(s, signed, c.MembershipKey, gc); !errors.Is(err, framing.ErrNotAllowed) {
					t.Fatalf("application as PublicMessage: %v", err)
				}
			}
		})
	}
}

// TestSenderDataVectors checks the sender data key and nonce of every case
// of secret-tree.json (§6.3.2).
func TestSenderDataVectors(t *testing.T) {
	var cases []struct {
		Suite      uint16 `json:"cipher_suite"`
		SenderData struct {
			Secret     vectors.Hex `json:"sender_data_secret"`
			Ciphertext vectors.Hex `json:"ciphertext"`
			Key        vectors.Hex `json:"key"`
			Nonce      vectors.Hex `json:"nonce"`
		} `json:"sender_data"`
	}
	vectors.Load(t, "secret-tree.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("secret-tree/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			sd := c.SenderData
			key, nonce, err := framing.SenderDataKeyNonce(s, sd.Secret, sd.Ciphertext)
			if err != nil || !bytes.Equal(key, sd.Key) || !bytes.Equal(nonce, sd.Nonce) {
				t.Fatalf("key %x nonce %x (%v); want %x %x", key, nonce, err, sd.Key, sd.Nonce)
			}
		})
	}
}
