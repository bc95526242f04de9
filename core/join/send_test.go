package join_test

import (
	"bytes"
	"io"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// senderWorld is an adder and joiners of the given wrappers, each with a
// published key package, and one adding commit of all of them.
func senderWorld(t *testing.T, wrappers ...ports.WrapperAlgorithmID) (*world, *inst, []*inst, added) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	var js []*inst
	for i, wr := range wrappers {
		js = append(js, w.newInst("joiner"+string(rune('0'+i)), instOptions{Wrapper: wr}))
	}
	ad := a.newGroup(groupSpec{}).add(addSpec{}, js...)
	return w, a, js, ad
}

func envelopes(t *testing.T, a *inst, ad added, rnd io.Reader) []*backendpb.ClientEnvelope {
	t.Helper()
	envs, err := (&join.Sender{Algorithms: a.reg, Rand: rnd}).Envelopes(a.w.ctx, ad.welcome, ad.anchor, ad.recipients)
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

// openInline opens an inline V1 with j's stored wrapper private key under
// the algorithm j's key package advertised.
func (j *inst) openInline(t *testing.T, v1 *apipb.WelcomeMessage_V1) (welcomeMsg []byte, cursor uint64) {
	t.Helper()
	recs := j.records()
	kp := recs[len(recs)-1]
	wr, _ := j.reg.Wrapper(ports.WrapperAlgorithmID(kp.WrapperAlgorithm))
	plain, err := wr.Open(j.w.ctx, kp.WrapperPrivateKey, ports.WelcomeWrapperInfo(), v1.Data, v1.WelcomeMetadata)
	if err != nil {
		t.Fatalf("%s cannot open its Welcome: %v", j.name, err)
	}
	var m contentspb.WelcomeMetadata
	if err := proto.Unmarshal(plain[1], &m); err != nil {
		t.Fatal(err)
	}
	return plain[0], m.MessageCursor
}

// JOIN-071, JOIN-036: each installation's Welcome is sealed under the
// algorithm and key its key package advertised, labelled with them, and
// carries the adding commit's sequence id as message_cursor.
func TestJOIN071_WrapUnderTheAdvertisedKey(t *testing.T) {
	_, a, js, ad := senderWorld(t, ports.WrapperXWingMLKEM768Draft6, ports.WrapperCurve25519)
	envs := envelopes(t, a, ad, nil)
	if len(envs) != 2 {
		t.Fatalf("%d envelopes for two inline recipients", len(envs))
	}
	for i, j := range js {
		recs := j.records()
		kp := recs[len(recs)-1]
		v1 := envs[i].GetWelcomeMessage().GetV1()
		if v1 == nil || !bytes.Equal(envs[i].TargetTopic, join.WelcomeTopic(j.key())) || !bytes.Equal(v1.InstallationKey, j.key()) {
			t.Fatalf("%s: envelope %+v is not an inline Welcome on its topic", j.name, envs[i])
		}
		if int32(v1.WrapperAlgorithm) != kp.WrapperAlgorithm || !bytes.Equal(v1.HpkePublicKey, kp.WrapperPublicKey) {
			t.Fatalf("%s: labelled %v under %x, the key package advertised %v", j.name, v1.WrapperAlgorithm, v1.HpkePublicKey[:4], kp.WrapperAlgorithm)
		}
		msg, cursor := j.openInline(t, v1)
		if !bytes.Equal(msg, ad.welcome) || cursor != ad.anchor {
			t.Fatalf("%s: opened a different Welcome or cursor %d, want %d", j.name, cursor, ad.anchor)
		}
	}
}

// JOIN-040: the Welcome the client sends, as the engine builds it for an
// adding commit, carries the ratchet tree in its GroupInfo.
func TestJOIN040_WelcomeCarriesTheRatchetTree(t *testing.T) {
	_, a, js, ad := senderWorld(t, ports.WrapperXWingMLKEM768Draft6)
	j := js[0]
	msg, _ := j.openInline(t, envelopes(t, a, ad, nil)[0].GetWelcomeMessage().GetV1())
	m, err := framing.Decode(msg)
	if err != nil || m.Welcome == nil {
		t.Fatalf("not a Welcome: %v", err)
	}
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	recs := j.records()
	var kp message.KeyPackage
	if err := codec.Unmarshal(recs[len(recs)-1].KeyPackage, &kp); err != nil {
		t.Fatal(err)
	}
	gs, err := welcome.OpenSecrets(s, m.Welcome, &kp, recs[len(recs)-1].InitPrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	gi, err := welcome.OpenGroupInfo(s, m.Welcome, gs.JoinerSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range gi.Extensions {
		if e.Type == message.ExtRatchetTree && len(e.Data) > 0 {
			return
		}
	}
	t.Fatalf("the GroupInfo has no ratchet_tree extension: %+v", gi.Extensions)
}

// JOIN-091: pointers go only to installations advertising both X-Wing and
// ChaCha20-Poly1305, and only when more than two of them are added; every
// other installation gets an inline Welcome in the same publish, after the
// one pointee.
func TestJOIN091_PointersOnlyToPointerCapable(t *testing.T) {
	x, c := ports.WrapperXWingMLKEM768Draft6, ports.WrapperCurve25519
	t.Run("three capable and one classical", func(t *testing.T) {
		_, _, js, ad := senderWorld(t, x, x, c, x)
		envs := envelopes(t, js[0], ad, nil)
		if len(envs) != 5 {
			t.Fatalf("%d envelopes, want a pointee and four", len(envs))
		}
		pe := envs[0].GetWelcomeMessage().GetV1()
		if pe == nil || pe.WrapperAlgorithm != contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY {
			t.Fatalf("the first envelope is not the pointee: %+v", envs[0])
		}
		for i, j := range js {
			env := envs[i+1]
			isPointer := env.GetWelcomeMessage().GetWelcomePointer() != nil
			if isPointer != (j.opts.Wrapper != c) {
				t.Fatalf("%s (%v): pointer %v", j.name, j.opts.Wrapper, isPointer)
			}
		}
	})
	t.Run("two capable", func(t *testing.T) {
		_, _, js, ad := senderWorld(t, x, x, c)
		for _, env := range envelopes(t, js[0], ad, nil) {
			if env.GetWelcomeMessage().GetV1() == nil || env.GetWelcomeMessage().GetV1().WrapperAlgorithm == contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY {
				t.Fatalf("a pointer or pointee with only two capable recipients: %+v", env)
			}
		}
	})
	t.Run("X-Wing without the pointee AEAD", func(t *testing.T) {
		_, a, _, ad := senderWorld(t, x, x, x)
		for i := range ad.recipients {
			ad.recipients[i].PointeeAEADs = nil
		}
		for _, env := range envelopes(t, a, ad, nil) {
			if env.GetWelcomeMessage().GetWelcomePointer() != nil {
				t.Fatal("a pointer to an installation that advertises no pointee AEAD")
			}
		}
	})
}

// sameTwice is a random source whose first four reads (destination, key,
// data nonce, metadata nonce) return the same bytes: the worst source
// JOIN-065 must survive.
type sameTwice struct {
	calls int
}

func (s *sameTwice) Read(p []byte) (int, error) {
	s.calls++
	v := byte(7)
	if s.calls > 4 { // the destination, key and both nonces, then a redraw
		v = byte(s.calls)
	}
	for i := range p {
		p[i] = v
	}
	return len(p), nil
}

// JOIN-029, JOIN-030, JOIN-065, JOIN-078: a pointee has a fresh random
// 32-byte destination and key of its own, two different 12-byte nonces,
// aead_type ChaCha20-Poly1305, and its data and metadata open under that
// key and nonce with ChaCha20-Poly1305 (checked with x/crypto, not the
// adapter); published as a V1 whose installation_key is the destination,
// labelled SYMMETRIC_KEY.
func TestJOIN029_PointeeKeysAndEncryption(t *testing.T) {
	x := ports.WrapperXWingMLKEM768Draft6
	_, _, js, ad := senderWorld(t, x, x, x)
	a := js[0]
	open := func(envs []*backendpb.ClientEnvelope) (*apipb.WelcomeMessage_V1, *contentspb.WelcomePointer_WelcomeV1Pointer) {
		pe := envs[0].GetWelcomeMessage().GetV1()
		wp := envs[1].GetWelcomeMessage().GetWelcomePointer()
		recs := js[0].records()
		kp := recs[len(recs)-1]
		wr, _ := a.reg.Wrapper(x)
		plain, err := wr.Open(a.w.ctx, kp.WrapperPrivateKey, ports.WelcomeWrapperInfo(), wp.WelcomePointer)
		if err != nil {
			t.Fatal(err)
		}
		var p contentspb.WelcomePointer
		if err := proto.Unmarshal(plain[0], &p); err != nil {
			t.Fatal(err)
		}
		return pe, p.GetWelcomeV1Pointer()
	}
	pe1, p1 := open(envelopes(t, a, ad, nil))
	_, p2 := open(envelopes(t, a, ad, nil))
	if len(p1.Destination) != 32 || len(p1.EncryptionKey) != 32 {
		t.Fatalf("JOIN-029/030: destination %d bytes, key %d bytes", len(p1.Destination), len(p1.EncryptionKey))
	}
	if bytes.Equal(p1.Destination, p2.Destination) || bytes.Equal(p1.EncryptionKey, p2.EncryptionKey) {
		t.Fatal("JOIN-029/030: two pointees of the same Welcome share a destination or key")
	}
	for _, r := range ad.recipients {
		if bytes.Contains(r.InstallationKey, p1.Destination[:8]) || bytes.Contains(ad.welcome, p1.Destination[:8]) {
			t.Fatal("JOIN-029: the destination is drawn from a recipient or the Welcome")
		}
	}
	if len(p1.DataNonce) != 12 || len(p1.WelcomeMetadataNonce) != 12 || bytes.Equal(p1.DataNonce, p1.WelcomeMetadataNonce) {
		t.Fatalf("JOIN-065: nonces %x and %x", p1.DataNonce, p1.WelcomeMetadataNonce)
	}
	if p1.AeadType != contentspb.WelcomePointeeEncryptionAeadType_WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305 ||
		pe1.WrapperAlgorithm != contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY || !bytes.Equal(pe1.InstallationKey, p1.Destination) {
		t.Fatalf("JOIN-078: pointee %v under %v", pe1.WrapperAlgorithm, p1.AeadType)
	}
	aead, _ := chacha20poly1305.New(p1.EncryptionKey)
	data, err := aead.Open(nil, p1.DataNonce, pe1.Data, nil)
	if err != nil || !bytes.Equal(data, ad.welcome) {
		t.Fatalf("JOIN-078: pointee data does not open with ChaCha20-Poly1305: %v", err)
	}
	md, err := aead.Open(nil, p1.WelcomeMetadataNonce, pe1.WelcomeMetadata, nil)
	var m contentspb.WelcomeMetadata
	if err != nil || proto.Unmarshal(md, &m) != nil || m.MessageCursor != ad.anchor {
		t.Fatalf("JOIN-078: pointee metadata: %v", err)
	}
	// JOIN-065 with a source that repeats itself: the nonces still differ.
	_, p3 := open(envelopes(t, a, ad, &sameTwice{}))
	if bytes.Equal(p3.DataNonce, p3.WelcomeMetadataNonce) {
		t.Fatal("JOIN-065: equal nonces from a repeating source")
	}
}

// JOIN-091 end to end: three X-Wing joiners and one classical one join
// from one publish, through the pointee and inline Welcomes.
func TestJoinThroughPointers(t *testing.T) {
	x, c := ports.WrapperXWingMLKEM768Draft6, ports.WrapperCurve25519
	_, a, js, ad := senderWorld(t, x, c, x, x)
	g := &grp{a: a}
	seqs := g.send(ad)
	for i, j := range js {
		j.process()
		j.want(seqs[i+1], "joined")
	}
}
