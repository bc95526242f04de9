// Package memtransport is an in-process [ports.Transport]: it calls a
// [ports.DeliveryService] (for example core/delivery's Service) directly,
// with the semantics a network transport has — ctx deadlines honoured,
// envelopes copied in both directions so neither side can change what the
// other holds, subscriptions that resume from their last delivered cursor.
package memtransport

import (
	"context"
	"crypto/rand"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Options configures a [Transport].
type Options struct {
	// InstallationKey is the installation the transport's calls are made
	// as. An in-process caller is trusted, so no challenge is signed. Nil
	// makes the transport act as a fresh random installation.
	InstallationKey []byte
	// Anonymous makes the transport's calls unauthenticated, as a client
	// that never proved a key: it can read capability and public topics
	// and cannot publish. It overrides InstallationKey.
	Anonymous bool
}

// Transport is a [ports.Transport] over an in-process delivery service.
type Transport struct {
	svc    ports.DeliveryService
	caller ports.Caller
}

var _ ports.Transport = (*Transport)(nil)

// New returns a transport calling svc.
func New(svc ports.DeliveryService, opts *Options) *Transport {
	var o Options
	if opts != nil {
		o = *opts
	}
	t := &Transport{svc: svc}
	switch {
	case o.Anonymous:
	case len(o.InstallationKey) != 0:
		t.caller.InstallationKey = append([]byte(nil), o.InstallationKey...)
	default:
		t.caller.InstallationKey = make([]byte, 32)
		_, _ = rand.Read(t.caller.InstallationKey)
	}
	return t
}

func ctxErr(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, err)
	}
	return nil
}

// Publish implements [ports.Transport.Publish].
func (t *Transport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if err := ctxErr(ctx, "publish"); err != nil {
		return nil, err
	}
	cp := make([]*backendpb.ClientEnvelope, len(envs))
	for i, e := range envs {
		if e != nil {
			cp[i] = proto.CloneOf(e)
		}
	}
	return t.svc.Publish(ctx, t.caller, cp)
}

// Query implements [ports.Transport.Query].
func (t *Transport) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if err := ctxErr(ctx, "query"); err != nil {
		return nil, err
	}
	return t.svc.Query(ctx, t.caller, topic, after, limit)
}

// QueryNewest implements [ports.Transport.QueryNewest].
func (t *Transport) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	if err := ctxErr(ctx, "query newest"); err != nil {
		return nil, err
	}
	return t.svc.QueryNewest(ctx, t.caller, topic)
}

// HighestSequenceID implements [ports.Transport.HighestSequenceID].
func (t *Transport) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	if err := ctxErr(ctx, "highest sequence id"); err != nil {
		return 0, err
	}
	return t.svc.HighestSequenceID(ctx, t.caller, topic)
}

// Subscribe implements [ports.Transport.Subscribe]. The stream re-opens the
// service's subscription from the last delivered cursor of each topic when
// the service ends it with an error wrapping [ports.ErrUnavailable].
func (t *Transport) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	if err := ctxErr(ctx, "subscribe"); err != nil {
		return nil, err
	}
	cs := make([]ports.TopicCursor, len(cursors))
	for i, c := range cursors {
		cs[i] = ports.TopicCursor{Topic: append([]byte(nil), c.Topic...), After: c.After}
	}
	inner, err := t.svc.Subscribe(ctx, t.caller, cs)
	if err != nil {
		return nil, err
	}
	s := &subscription{t: t, ctx: ctx, inner: inner, cursors: cs, index: map[string]int{}}
	for i, c := range cs {
		s.index[string(c.Topic)] = i
	}
	return s, nil
}
