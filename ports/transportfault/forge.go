package transportfault

import (
	"math"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Extreme are the sequence ids [JunkExtreme] places junk at: the highest a
// signed 64-bit store holds, the first it cannot, and the highest of all.
var Extreme = []uint64{math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}

// perTopic bounds the envelopes the operator remembers of one topic.
const perTopic = 8

// pool is what the operator served, by topic kind and topic: the material
// of its forgeries.
type pool struct {
	mu     sync.Mutex
	topics map[ports.TopicKind]map[string][]*backendpb.OriginatorEnvelope
}

func newPool() pool {
	return pool{topics: map[ports.TopicKind]map[string][]*backendpb.OriginatorEnvelope{}}
}

func (p *pool) remember(topic []byte, envs []*backendpb.OriginatorEnvelope) {
	if len(topic) == 0 || len(envs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := ports.TopicKind(topic[0])
	if p.topics[k] == nil {
		p.topics[k] = map[string][]*backendpb.OriginatorEnvelope{}
	}
	held := p.topics[k][string(topic)]
	for _, e := range envs {
		if e != nil {
			held = append(held, clone(e))
		}
	}
	if len(held) > perTopic {
		held = held[len(held)-perTopic:]
	}
	p.topics[k][string(topic)] = held
}

// others returns the remembered envelopes of the other topics of topic's
// kind, in a deterministic order.
func (p *pool) others(topic []byte) []*backendpb.OriginatorEnvelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []string
	for t := range p.topics[ports.TopicKind(topic[0])] {
		if t != string(topic) {
			keys = append(keys, t)
		}
	}
	sortStrings(keys)
	var out []*backendpb.OriginatorEnvelope
	for _, t := range keys {
		out = append(out, p.topics[ports.TopicKind(topic[0])][t]...)
	}
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func clone(e *backendpb.OriginatorEnvelope) *backendpb.OriginatorEnvelope {
	return proto.Clone(e).(*backendpb.OriginatorEnvelope)
}

// distort applies the answer faults to an honest page of topic after
// after: a shorter prefix, forgeries in its gaps and at its end, copies,
// and a shuffle.
func (op *Operator) distort(topic []byte, after uint64, page []*backendpb.OriginatorEnvelope) []*backendpb.OriginatorEnvelope {
	if len(topic) == 0 {
		return page
	}
	if len(page) > 1 && op.fire(ShortPage) {
		page = page[:1+op.intN(len(page)-1)]
	}
	switch kind := ports.TopicKind(topic[0]); {
	case kind == ports.TopicCommitLog && op.fire(ForgeCommitLog):
		page = op.inGap(after, page, op.forgedEntry(topic, page))
	case kind == ports.TopicWelcomes && isPointee(page) && op.fire(ForgePointee):
		page = op.pointees(topic, page)
	case kind == ports.TopicWelcomes && op.fire(ForgeWelcome):
		page = op.inGap(after, page, op.forgedWelcome(topic))
	case kind == ports.TopicGroupMessages && op.fire(ForgeMessage):
		page = op.inGap(after, page, op.forgedMessage(topic))
	}
	if op.fire(JunkExtreme) {
		j := op.junkEnvelope(topic)
		j.SequenceId = Extreme[op.intN(len(Extreme))]
		page = append(page, j)
	}
	if len(page) > 0 && op.fire(Duplicate) {
		i := op.intN(len(page))
		page = append(page[:i+1], append([]*backendpb.OriginatorEnvelope{clone(page[i])}, page[i+1:]...)...)
	}
	if len(page) > 1 && op.fire(Reorder) {
		op.mu.Lock()
		op.rng.Shuffle(len(page), func(i, j int) { page[i], page[j] = page[j], page[i] })
		op.mu.Unlock()
	}
	return page
}

// inGap places forged at a sequence id strictly between two neighbouring
// ids of the answer (after counting as the first), so no honest envelope
// of the answer shares its id; with no gap the answer is unchanged.
func (op *Operator) inGap(after uint64, page []*backendpb.OriginatorEnvelope, forged *backendpb.OriginatorEnvelope) []*backendpb.OriginatorEnvelope {
	if forged == nil {
		return page
	}
	var gaps []int
	prev := after
	for i, e := range page {
		if e.GetSequenceId() > prev+1 {
			gaps = append(gaps, i)
		}
		prev = e.GetSequenceId()
	}
	if len(gaps) == 0 {
		return page
	}
	i := gaps[op.intN(len(gaps))]
	lo := after
	if i > 0 {
		lo = page[i-1].GetSequenceId()
	}
	span := page[i].GetSequenceId() - lo - 1
	forged.SequenceId = lo + 1 + uint64(op.intN(int(min(span, 1<<30))))
	out := append([]*backendpb.OriginatorEnvelope(nil), page[:i]...)
	out = append(out, forged)
	return append(out, page[i:]...)
}

// forgedEntry is another conversation's sealed entry re-addressed to this
// topic (claiming this log's commit_log_id when the answer shows it), or
// an entry of random bytes.
func (op *Operator) forgedEntry(topic []byte, page []*backendpb.OriginatorEnvelope) *backendpb.OriginatorEnvelope {
	others := op.pool.others(topic)
	if len(others) == 0 || op.intN(3) == 0 {
		return op.junkEnvelope(topic)
	}
	f := clone(others[op.intN(len(others))])
	f.Envelope.TargetTopic = append([]byte(nil), topic...)
	if se := f.GetEnvelope().GetSealedCommitLogEntry(); se != nil && len(page) > 0 && op.intN(2) == 0 {
		se.CommitLogId = append([]byte(nil), page[0].GetEnvelope().GetSealedCommitLogEntry().GetCommitLogId()...)
	}
	return f
}

// forgedWelcome is a Welcome served to another installation, re-addressed
// to this topic's installation half of the time, or one of random bytes.
func (op *Operator) forgedWelcome(topic []byte) *backendpb.OriginatorEnvelope {
	others := op.pool.others(topic)
	if len(others) == 0 || op.intN(3) == 0 {
		return op.junkEnvelope(topic)
	}
	f := clone(others[op.intN(len(others))])
	f.Envelope.TargetTopic = append([]byte(nil), topic...)
	if v1 := f.GetEnvelope().GetWelcomeMessage().GetV1(); v1 != nil && op.intN(2) == 0 {
		v1.InstallationKey = append([]byte(nil), topic[1:]...)
	}
	return f
}

// forgedMessage is another group's message, or one of random bytes.
func (op *Operator) forgedMessage(topic []byte) *backendpb.OriginatorEnvelope {
	others := op.pool.others(topic)
	if len(others) == 0 || op.intN(2) == 0 {
		return op.junkEnvelope(topic)
	}
	f := clone(others[op.intN(len(others))])
	f.Envelope.TargetTopic = append([]byte(nil), topic...)
	return f
}

// isPointee reports whether the answer starts with a pointee: a
// WelcomeMessage.V1 under the symmetric-key wrapper.
func isPointee(page []*backendpb.OriginatorEnvelope) bool {
	if len(page) == 0 {
		return false
	}
	v1 := page[0].GetEnvelope().GetWelcomeMessage().GetV1()
	return v1 != nil && v1.GetWrapperAlgorithm() == contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY
}

// pointees appends, after the answer's last envelope, a pointee of random
// data for the same destination and another topic's pointee re-addressed
// to it.
func (op *Operator) pointees(topic []byte, page []*backendpb.OriginatorEnvelope) []*backendpb.OriginatorEnvelope {
	last := page[len(page)-1].GetSequenceId()
	first := clone(page[0])
	v1 := first.GetEnvelope().GetWelcomeMessage().GetV1()
	v1.Data = op.junk(len(v1.GetData()) + 1)
	first.SequenceId = last + 1
	out := append(append([]*backendpb.OriginatorEnvelope(nil), page...), first)
	for _, o := range op.pool.others(topic) {
		if isPointee([]*backendpb.OriginatorEnvelope{o}) {
			f := clone(o)
			f.Envelope.TargetTopic = append([]byte(nil), topic...)
			f.GetEnvelope().GetWelcomeMessage().GetV1().InstallationKey = append([]byte(nil), topic[1:]...)
			f.SequenceId = last + 2
			out = append(out, f)
			break
		}
	}
	return out
}

// junkEnvelope is an envelope of the topic's kind holding random bytes (a
// group message for a kind without a typed payload of its own).
func (op *Operator) junkEnvelope(topic []byte) *backendpb.OriginatorEnvelope {
	ce := &backendpb.ClientEnvelope{TargetTopic: append([]byte(nil), topic...)}
	switch ports.TopicKind(topic[0]) {
	case ports.TopicWelcomes:
		ce.Payload = &backendpb.ClientEnvelope_WelcomeMessage{WelcomeMessage: &apipb.WelcomeMessage{
			Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{InstallationKey: append([]byte(nil), topic[1:]...),
				Data: op.junk(96), HpkePublicKey: op.junk(32),
				WrapperAlgorithm: contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_CURVE25519}}}}
	case ports.TopicCommitLog:
		ce.Payload = &backendpb.ClientEnvelope_SealedCommitLogEntry{SealedCommitLogEntry: &backendpb.SealedCommitLogEntry{
			CommitLogId: op.junk(32), Nonce: op.junk(12), Ciphertext: op.junk(80), Signature: op.junk(64)}}
	default:
		ce.Payload = &backendpb.ClientEnvelope_GroupMessage{GroupMessage: op.junk(16 + op.intN(100))}
	}
	return &backendpb.OriginatorEnvelope{ServerTimestampNs: 1, Envelope: ce}
}
