package recovery_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// faultTransport wraps a member's transport: it fails publishes of
// Welcomes on demand and counts the newest-key-package queries per
// installation.
type faultTransport struct {
	ports.Transport
	mu sync.Mutex
	// welcomeFaults are consumed by the publishes of Welcome envelopes,
	// one each, in order.
	welcomeFaults []publishFault
	kpQueries     map[string]int
	// lag, when set, is the last sequence id a query of a group topic
	// serves, as a lagging copy of the store does.
	lag uint64
	// groupPublishes counts publishes to group topics.
	groupPublishes int
	// subscribed receives a value at each Subscribe, when not full.
	subscribed chan struct{}
	// crashKind and crash stop the process at the next publish to a
	// topic of that kind, or newest-envelope query of one: crash runs (it cancels the context every later
	// store write uses, as a killed process writes nothing more) and the
	// publish fails without storing anything.
	crashKind ports.TopicKind
	crash     func()
	// crashSpare is a topic identifier the crash spares: the installation's
	// own key-package topic, which its key-package manager reads and
	// publishes to on its own schedule.
	crashSpare []byte
}

// crashes reports whether a call on topic is the armed crash point.
func (f *faultTransport) crashes(topic []byte) bool {
	return f.crash != nil && len(topic) > 0 && topic[0] == byte(f.crashKind) &&
		(f.crashSpare == nil || !bytes.Equal(topic[1:], f.crashSpare))
}

// crashAt arms crash for the next publish to a topic of kind k.
func (f *faultTransport) crashAt(k ports.TopicKind, crash func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashKind, f.crash = k, crash
}

// lagGroups makes queries of group topics serve nothing after seq; 0
// ends the lag.
func (f *faultTransport) lagGroups(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lag = seq
}

// publishesToGroups returns how many publishes went to group topics.
func (f *faultTransport) publishesToGroups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groupPublishes
}

func (f *faultTransport) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := f.Transport.Query(ctx, topic, after, limit)
	f.mu.Lock()
	lag := f.lag
	f.mu.Unlock()
	if err != nil || lag == 0 || len(topic) == 0 || topic[0] != byte(ports.TopicGroupMessages) {
		return envs, err
	}
	var out []*backendpb.OriginatorEnvelope
	for _, e := range envs {
		if e.GetSequenceId() <= lag {
			out = append(out, e)
		}
	}
	return out, nil
}

// publishFault says what one publish of Welcomes does.
type publishFault struct {
	// store publishes the envelopes before failing, as a delivery service
	// whose answer was lost does.
	store bool
	err   error
}

func wrapFaults(tr ports.Transport) *faultTransport {
	return &faultTransport{Transport: tr, kpQueries: map[string]int{}, subscribed: make(chan struct{}, 16)}
}

// failWelcomes makes the next publishes of Welcomes fail as given.
func (f *faultTransport) failWelcomes(fs ...publishFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.welcomeFaults = append(f.welcomeFaults, fs...)
}

// keyPackageQueries returns how often the newest key package of the
// installation was asked for.
func (f *faultTransport) keyPackageQueries(key []byte) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kpQueries[string(key)]
}

func (f *faultTransport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	f.mu.Lock()
	crash := f.crash
	if len(envs) > 0 && f.crashes(envs[0].GetTargetTopic()) {
		f.crash = nil
	} else {
		crash = nil
	}
	f.mu.Unlock()
	if crash != nil {
		crash()
		return nil, fmt.Errorf("injected crash: %w", context.Canceled)
	}
	if len(envs) > 0 && len(envs[0].GetTargetTopic()) > 0 && envs[0].GetTargetTopic()[0] == byte(ports.TopicGroupMessages) {
		f.mu.Lock()
		f.groupPublishes++
		f.mu.Unlock()
	}
	if len(envs) > 0 && len(envs[0].GetTargetTopic()) > 0 && envs[0].GetTargetTopic()[0] == byte(ports.TopicWelcomes) {
		f.mu.Lock()
		var pf *publishFault
		if len(f.welcomeFaults) > 0 {
			pf = &f.welcomeFaults[0]
			f.welcomeFaults = f.welcomeFaults[1:]
		}
		f.mu.Unlock()
		if pf != nil {
			if pf.store {
				if _, err := f.Transport.Publish(ctx, envs); err != nil {
					return nil, err
				}
			}
			return nil, fmt.Errorf("injected: %w", pf.err)
		}
	}
	return f.Transport.Publish(ctx, envs)
}

func (f *faultTransport) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	f.mu.Lock()
	crash := f.crash
	if f.crashes(topic) {
		f.crash = nil
	} else {
		crash = nil
	}
	f.mu.Unlock()
	if crash != nil {
		crash()
		return nil, fmt.Errorf("injected crash: %w", context.Canceled)
	}
	if len(topic) == 33 && topic[0] == byte(ports.TopicKeyPackages) {
		f.mu.Lock()
		f.kpQueries[string(topic[1:])]++

		f.mu.Unlock()
	}
	return f.Transport.QueryNewest(ctx, topic)
}

func (f *faultTransport) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	sub, err := f.Transport.Subscribe(ctx, cursors)
	select {
	case f.subscribed <- struct{}{}:
	default:
	}
	return sub, err
}
