package delivery

import (
	"context"
	"crypto/sha256"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// admitted remembers the identity updates admission accepted lately, by
// the SHA-256 of their envelope's deterministic encoding, so that a
// replayed update is not verified again (COMP-333). Verifying an identity
// update is a pure function of its bytes (its signatures and inbox id), so
// bytes equal to admitted bytes are admitted; a replay flood otherwise
// made the service check the same signatures tens of thousands of times,
// and that CPU was the honest clients' latency. The set holds the last
// admittedCap digests; an older replay is simply verified again.
type admitted struct {
	mu   sync.Mutex
	set  map[[sha256.Size]byte]struct{}
	ring [][sha256.Size]byte
	next int
}

// admittedCap bounds the set: 32 bytes a digest, about 256 KiB with the
// map's overhead.
const admittedCap = 4096

func newAdmitted() *admitted {
	return &admitted{set: make(map[[sha256.Size]byte]struct{}, admittedCap)}
}

// admitOnce is admit, answered from the set for an identity update whose
// bytes were admitted before.
func (s *Service) admitOnce(ctx context.Context, env *backendpb.ClientEnvelope) (ports.TopicKind, error) {
	if _, ok := env.GetPayload().(*backendpb.ClientEnvelope_IdentityUpdate); !ok || s.admitted == nil {
		return s.admit(ctx, env)
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(env)
	if err != nil {
		return s.admit(ctx, env)
	}
	sum := sha256.Sum256(raw)
	if s.admitted.has(sum) {
		return ports.TopicIdentityUpdates, nil
	}
	kind, err := s.admit(ctx, env)
	if err == nil && kind == ports.TopicIdentityUpdates {
		s.admitted.add(sum)
	}
	return kind, err
}

func (a *admitted) has(sum [sha256.Size]byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.set[sum]
	return ok
}

func (a *admitted) add(sum [sha256.Size]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.set[sum]; ok {
		return
	}
	if len(a.ring) < admittedCap {
		a.ring = append(a.ring, sum)
	} else {
		delete(a.set, a.ring[a.next])
		a.ring[a.next] = sum
		a.next = (a.next + 1) % admittedCap
	}
	a.set[sum] = struct{}{}
}
