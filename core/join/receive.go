package join

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Joined describes a group this installation joined from a Welcome.
type Joined struct {
	GroupID          []byte
	ConversationType ports.ConversationType
	// Adder is the leaf at GroupInfo.signer (JOIN-025).
	Adder ports.Member
	// Anchor is the Welcome's message_cursor.
	Anchor uint64
	// Replaced reports a Welcome that replaced state the client held.
	Replaced bool
	// WelcomeSequenceID is the Welcome's sequence id on the welcome topic.
	WelcomeSequenceID uint64
}

// ReceiverOptions configure a [Receiver]. Every field but OnJoined is
// required.
type ReceiverOptions struct {
	Store        ports.Store
	MLS          ports.MLS
	Transport    ports.Transport
	Clock        ports.Clock
	Algorithms   *algorithm.Registry
	Installation identity.Installation
	// Log starts the commit log's membership in the install transaction.
	Log *commitlog.Log
	// OnJoined is called after the transaction that installed a group
	// commits.
	OnJoined func(Joined)
}

// Receiver processes this installation's welcome topic.
type Receiver struct {
	o ReceiverOptions
}

// NewReceiver returns a receiver.
func NewReceiver(o ReceiverOptions) (*Receiver, error) {
	if o.Store == nil || o.MLS == nil || o.Transport == nil || o.Clock == nil || o.Algorithms == nil || o.Log == nil || len(o.Installation.InstallationKey) == 0 {
		return nil, errors.New("join receiver: every dependency is required")
	}
	return &Receiver{o: o}, nil
}

const (
	nsJoin      = "regroup/join"
	keyCursor   = "cursor"
	welcomePage = 100
)

// Topic returns this installation's welcome topic.
func (r *Receiver) Topic() []byte { return WelcomeTopic(r.o.Installation.PublicKey()) }

// Cursor returns the sequence id of the last envelope processed on the
// welcome topic.
func (r *Receiver) Cursor(ctx context.Context) (cur uint64, err error) {
	err = r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		cur, err = cursor(ctx, tx)
		return err
	})
	return cur, err
}

func cursor(ctx context.Context, tx ports.Tx) (uint64, error) {
	b, err := tx.Blobs().Get(ctx, nsJoin, keyCursor)
	if errors.Is(err, ports.ErrNotFound) {
		return 0, nil
	}
	if err != nil || len(b) != 8 {
		return 0, err
	}
	return binary.BigEndian.Uint64(b), nil
}

func setCursor(ctx context.Context, tx ports.Tx, seq uint64) error {
	return tx.Blobs().Put(ctx, nsJoin, keyCursor, binary.BigEndian.AppendUint64(nil, seq))
}

// Process processes every envelope of the welcome topic after the stored
// cursor, in order.
func (r *Receiver) Process(ctx context.Context) error {
	for {
		cur, err := r.Cursor(ctx)
		if err != nil {
			return err
		}
		envs, err := r.o.Transport.Query(ctx, r.Topic(), cur, welcomePage)
		if err != nil {
			return fmt.Errorf("read welcomes: %w", err)
		}
		if len(envs) == 0 {
			return nil
		}
		for _, env := range envs {
			if env.GetSequenceId() <= cur {
				continue
			}
			if err := r.handle(ctx, env); err != nil {
				return err
			}
			cur = env.GetSequenceId()
		}
	}
}

func (r *Receiver) handle(ctx context.Context, env *backendpb.OriginatorEnvelope) error {
	seq := env.GetSequenceId()
	v1 := env.GetEnvelope().GetWelcomeMessage().GetV1()
	var joined *Joined
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		joined = nil
		if v1 == nil {
			return setCursor(ctx, tx, seq)
		}
		j, err := r.install(ctx, tx, seq, v1)
		if err != nil {
			return err
		}
		joined = j
		return setCursor(ctx, tx, seq)
	})
	if err == nil && joined != nil && r.o.OnJoined != nil {
		r.o.OnJoined(*joined)
	}
	return err
}

func (r *Receiver) install(ctx context.Context, tx ports.Tx, seq uint64, v1 *apipb.WelcomeMessage_V1) (*Joined, error) {
	kp, err := tx.KeyPackages().ByWrapperPublicKey(ctx, v1.GetHpkePublicKey())
	if err != nil {
		return nil, err
	}
	w, err := r.o.Algorithms.Wrapper(ports.WrapperAlgorithmID(v1.GetWrapperAlgorithm()))
	if err != nil {
		return nil, err
	}
	plain, err := w.Open(ctx, kp.WrapperPrivateKey, ports.WelcomeWrapperInfo(), v1.GetData(), v1.GetWelcomeMetadata())
	if err != nil {
		return nil, err
	}
	var meta contentspb.WelcomeMetadata
	if err := proto.Unmarshal(plain[1], &meta); err != nil {
		return nil, err
	}
	st, err := r.o.MLS.StageWelcome(ctx, tx, plain[0], kp)
	if err != nil {
		return nil, err
	}
	d, err := metadata.FromExtensions(st.Group.Extensions)
	if err != nil {
		return nil, err
	}
	ct, err := d.ConversationType()
	if err != nil {
		return nil, err
	}
	root, err := d.GroupRootKey()
	if err != nil {
		return nil, err
	}
	view, err := r.o.MLS.InstallWelcome(ctx, tx, st.Handle)
	if err != nil {
		return nil, err
	}
	g := ports.Group{ID: view.GroupID, ConversationType: ct, Active: true, Cursor: meta.GetMessageCursor(),
		JoinAnchor: meta.GetMessageCursor(), GroupRoot: root, CreatedAt: r.o.Clock.Now(), UpdatedAt: r.o.Clock.Now()}
	if ct == ports.ConversationDM {
		one, two, err := d.DMMembers()
		if err != nil {
			return nil, err
		}
		g.DMID = metadata.DMID(one, two)
	}
	if err := tx.Groups().Insert(ctx, g); err != nil {
		return nil, err
	}
	if err := r.o.Log.BeginMembership(ctx, tx, view.GroupID, view, meta.GetMessageCursor()); err != nil {
		return nil, err
	}
	_ = time.Time{}
	return &Joined{GroupID: view.GroupID, ConversationType: ct, Adder: st.Signer, Anchor: meta.GetMessageCursor(), WelcomeSequenceID: seq}, nil
}
