package keyschedule_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

type epochVector struct {
	TreeHash                vectors.Hex `json:"tree_hash"`
	CommitSecret            vectors.Hex `json:"commit_secret"`
	PSKSecret               vectors.Hex `json:"psk_secret"`
	ConfirmedTranscriptHash vectors.Hex `json:"confirmed_transcript_hash"`
	GroupContext            vectors.Hex `json:"group_context"`
	JoinerSecret            vectors.Hex `json:"joiner_secret"`
	WelcomeSecret           vectors.Hex `json:"welcome_secret"`
	InitSecret              vectors.Hex `json:"init_secret"`
	SenderDataSecret        vectors.Hex `json:"sender_data_secret"`
	EncryptionSecret        vectors.Hex `json:"encryption_secret"`
	ExporterSecret          vectors.Hex `json:"exporter_secret"`
	EpochAuthenticator      vectors.Hex `json:"epoch_authenticator"`
	ExternalSecret          vectors.Hex `json:"external_secret"`
	ConfirmationKey         vectors.Hex `json:"confirmation_key"`
	MembershipKey           vectors.Hex `json:"membership_key"`
	ResumptionPSK           vectors.Hex `json:"resumption_psk"`
	ExternalPub             vectors.Hex `json:"external_pub"`
	Exporter                struct {
		Label   string      `json:"label"` // a string, used as is (not hex)
		Context vectors.Hex `json:"context"`
		Length  int         `json:"length"`
		Secret  vectors.Hex `json:"secret"`
	} `json:"exporter"`
}

func suiteOrSkip(t *testing.T, id uint16) *ciphersuite.Suite {
	t.Helper()
	s, err := ciphersuite.Lookup(ciphersuite.ID(id))
	if err != nil {
		t.Skipf("suite %d not implemented by regroup: %v", id, err)
	}
	return s
}

func eq(t *testing.T, name string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s = %x, want %x", name, got, want)
	}
}

// TestKeyScheduleVectors runs the five epochs of every case of
// key-schedule.json (§8, §8.3, §8.5).
func TestKeyScheduleVectors(t *testing.T) {
	var cases []struct {
		Suite             uint16        `json:"cipher_suite"`
		GroupID           vectors.Hex   `json:"group_id"`
		InitialInitSecret vectors.Hex   `json:"initial_init_secret"`
		Epochs            []epochVector `json:"epochs"`
	}
	vectors.Load(t, "key-schedule.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("key-schedule/%d", i), func(t *testing.T) {
			s := suiteOrSkip(t, c.Suite)
			init := c.InitialInitSecret
			for n, ev := range c.Epochs {
				gc := &message.GroupContext{
					Version: message.MLS10, CipherSuite: ciphersuite.ID(c.Suite), GroupID: c.GroupID,
					Epoch: uint64(n), TreeHash: ev.TreeHash, ConfirmedTranscriptHash: ev.ConfirmedTranscriptHash,
				}
				gcb, err := codec.Marshal(gc)
				if err != nil {
					t.Fatal(err)
				}
				eq(t, "group_context", gcb, ev.GroupContext)
				e, err := keyschedule.Derive(s, init, ev.CommitSecret, ev.PSKSecret, gcb)
				if err != nil {
					t.Fatalf("epoch %d: %v", n, err)
				}
				eq(t, "joiner_secret", e.JoinerSecret, ev.JoinerSecret)
				eq(t, "welcome_secret", e.WelcomeSecret, ev.WelcomeSecret)
				eq(t, "init_secret", e.InitSecret, ev.InitSecret)
				eq(t, "sender_data_secret", e.SenderDataSecret, ev.SenderDataSecret)
				eq(t, "encryption_secret", e.EncryptionSecret, ev.EncryptionSecret)
				eq(t, "exporter_secret", e.ExporterSecret, ev.ExporterSecret)
				eq(t, "epoch_authenticator", e.EpochAuthenticator, ev.EpochAuthenticator)
				eq(t, "external_secret", e.ExternalSecret, ev.ExternalSecret)
				eq(t, "confirmation_key", e.ConfirmationKey, ev.ConfirmationKey)
				eq(t, "membership_key", e.MembershipKey, ev.MembershipKey)
				eq(t, "resumption_psk", e.ResumptionPSK, ev.ResumptionPSK)
				_, pub, err := keyschedule.ExternalKeyPair(s, e.ExternalSecret)
				if err != nil {
					t.Fatal(err)
				}
				eq(t, "external_pub", pub, ev.ExternalPub)
				x := ev.Exporter
				out, err := keyschedule.Export(s, e.ExporterSecret, x.Label, x.Context, x.Length)
				if err != nil {
					t.Fatal(err)
				}
				eq(t, "exporter", out, x.Secret)
				j, err := keyschedule.FromJoiner(s, e.JoinerSecret, ev.PSKSecret, gcb)
				if err != nil {
					t.Fatal(err)
				}
				eq(t, "joiner's epoch_authenticator", j.EpochAuthenticator, ev.EpochAuthenticator)
				init = e.InitSecret
			}
		})
	}
}

// TestPSKSecretVectors runs every case of psk_secret.json (§8.4).
func TestPSKSecretVectors(t *testing.T) {
	var cases []struct {
		Suite uint16 `json:"cipher_suite"`
		PSKs  []struct {
			ID    vectors.Hex `json:"psk_id"`
			PSK   vectors.Hex `json:"psk"`
			Nonce vectors.Hex `json:"psk_nonce"`
		} `json:"psks"`
		PSKSecret vectors.Hex `json:"psk_secret"`
	}
	vectors.Load(t, "psk_secret.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("psk_secret/%d", i), func(t *testing.T) {
			s := suiteOrSkip(t, c.Suite)
			var psks []keyschedule.PSK
			for _, p := range c.PSKs {
				psks = append(psks, keyschedule.PSK{
					ID:     message.PreSharedKeyID{Type: message.PSKExternal, ID: p.ID, Nonce: p.Nonce},
					Secret: p.PSK,
				})
			}
			got, err := keyschedule.PSKSecret(s, psks)
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "psk_secret", got, c.PSKSecret)
		})
	}
}

// TestTranscriptHashVectors runs every case of transcript-hashes.json
// (§8.2): confirmation tag, confirmed and interim transcript hashes.
func TestTranscriptHashVectors(t *testing.T) {
	var cases []struct {
		Suite           uint16      `json:"cipher_suite"`
		ConfirmationKey vectors.Hex `json:"confirmation_key"`
		Content         vectors.Hex `json:"authenticated_content"`
		InterimBefore   vectors.Hex `json:"interim_transcript_hash_before"`
		ConfirmedAfter  vectors.Hex `json:"confirmed_transcript_hash_after"`
		InterimAfter    vectors.Hex `json:"interim_transcript_hash_after"`
	}
	vectors.Load(t, "transcript-hashes.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("transcript-hashes/%d", i), func(t *testing.T) {
			s := suiteOrSkip(t, c.Suite)
			var ac framing.AuthenticatedContent
			if err := codec.Unmarshal(c.Content, &ac); err != nil {
				t.Fatal(err)
			}
			in, err := ac.ConfirmedTranscriptHashInput()
			if err != nil {
				t.Fatal(err)
			}
			confirmed := keyschedule.ConfirmedTranscriptHash(s, c.InterimBefore, in)
			eq(t, "confirmed", confirmed, c.ConfirmedAfter)
			if !keyschedule.VerifyConfirmationTag(s, c.ConfirmationKey, confirmed, ac.Auth.ConfirmationTag) {
				t.Error("confirmation tag does not verify")
			}
			eq(t, "confirmation tag", keyschedule.ConfirmationTag(s, c.ConfirmationKey, confirmed), ac.Auth.ConfirmationTag)
			interim, err := keyschedule.InterimTranscriptHash(s, confirmed, ac.Auth.ConfirmationTag)
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "interim", interim, c.InterimAfter)
		})
	}
}
