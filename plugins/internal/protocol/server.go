package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// Server serves ports implementations over the Algorithms service. Each RPC
// runs the implementation under the RPC's context, which carries the host
// caller's deadline and cancellation.
type Server struct {
	pluginpb.UnimplementedAlgorithmsServer
	wrappers map[ports.WrapperAlgorithmID]ports.WrapperAlgorithm
	aeads    map[ports.PointeeAEADID]ports.PointeeAEAD
}

// NewServer returns a server for impls, each a ports.WrapperAlgorithm or a
// ports.PointeeAEAD with an identifier no other impl uses.
func NewServer(impls ...any) (*Server, error) {
	s := &Server{
		wrappers: map[ports.WrapperAlgorithmID]ports.WrapperAlgorithm{},
		aeads:    map[ports.PointeeAEADID]ports.PointeeAEAD{},
	}
	if len(impls) == 0 {
		return nil, fmt.Errorf("%w: a plugin must serve at least one algorithm", ports.ErrInvalidInput)
	}
	for i, impl := range impls {
		switch v := impl.(type) {
		case ports.WrapperAlgorithm:
			if s.wrappers[v.ID()] != nil {
				return nil, fmt.Errorf("%w: two wrappers with id %v", ports.ErrInvalidInput, v.ID())
			}
			s.wrappers[v.ID()] = v
		case ports.PointeeAEAD:
			if s.aeads[v.ID()] != nil {
				return nil, fmt.Errorf("%w: two pointee aeads with id %v", ports.ErrInvalidInput, v.ID())
			}
			s.aeads[v.ID()] = v
		default:
			return nil, fmt.Errorf("%w: argument %d (%T) is neither a ports.WrapperAlgorithm nor a ports.PointeeAEAD", ports.ErrInvalidInput, i, impl)
		}
	}
	return s, nil
}

func (s *Server) wrapper(id int32) (ports.WrapperAlgorithm, error) {
	if w := s.wrappers[ports.WrapperAlgorithmID(id)]; w != nil {
		return w, nil
	}
	return nil, ToStatus(fmt.Errorf("plugin serves no wrapper algorithm %v: %w", ports.WrapperAlgorithmID(id), ports.ErrUnsupportedAlgorithm))
}

func (s *Server) aead(id int32) (ports.PointeeAEAD, error) {
	if a := s.aeads[ports.PointeeAEADID(id)]; a != nil {
		return a, nil
	}
	return nil, ToStatus(fmt.Errorf("plugin serves no pointee aead %v: %w", ports.PointeeAEADID(id), ports.ErrUnsupportedAlgorithm))
}

// Describe lists the served algorithms in ascending id order.
func (s *Server) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	resp := &pluginpb.DescribeResponse{}
	for _, id := range slices.Sorted(mapKeys(s.wrappers)) {
		resp.Wrappers = append(resp.Wrappers, &pluginpb.WrapperDescription{
			Id: int32(id), PublicKeySize: uint32(s.wrappers[id].PublicKeySize())})
	}
	for _, id := range slices.Sorted(mapKeys(s.aeads)) {
		a := s.aeads[id]
		resp.Aeads = append(resp.Aeads, &pluginpb.AeadDescription{
			Id: int32(id), KeySize: uint32(a.KeySize()), NonceSize: uint32(a.NonceSize())})
	}
	return resp, nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// WrapperGenerateKey serves ports.WrapperAlgorithm.GenerateKey.
func (s *Server) WrapperGenerateKey(ctx context.Context, r *pluginpb.WrapperGenerateKeyRequest) (*pluginpb.WrapperGenerateKeyResponse, error) {
	w, err := s.wrapper(r.GetId())
	if err != nil {
		return nil, err
	}
	pub, priv, err := w.GenerateKey(ctx)
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.WrapperGenerateKeyResponse{PublicKey: pub, PrivateKey: priv}, nil
}

// WrapperCheckPublicKey serves ports.WrapperAlgorithm.CheckPublicKey.
func (s *Server) WrapperCheckPublicKey(ctx context.Context, r *pluginpb.WrapperCheckPublicKeyRequest) (*pluginpb.WrapperCheckPublicKeyResponse, error) {
	w, err := s.wrapper(r.GetId())
	if err != nil {
		return nil, err
	}
	if err := w.CheckPublicKey(ctx, r.GetPublicKey()); err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.WrapperCheckPublicKeyResponse{}, nil
}

// WrapperSeal serves ports.WrapperAlgorithm.Seal.
func (s *Server) WrapperSeal(ctx context.Context, r *pluginpb.WrapperSealRequest) (*pluginpb.WrapperSealResponse, error) {
	w, err := s.wrapper(r.GetId())
	if err != nil {
		return nil, err
	}
	sealed, err := w.Seal(ctx, r.GetPublicKey(), r.GetInfo(), r.GetPlaintexts()...)
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.WrapperSealResponse{Sealed: sealed}, nil
}

// WrapperOpen serves ports.WrapperAlgorithm.Open.
func (s *Server) WrapperOpen(ctx context.Context, r *pluginpb.WrapperOpenRequest) (*pluginpb.WrapperOpenResponse, error) {
	w, err := s.wrapper(r.GetId())
	if err != nil {
		return nil, err
	}
	pts, err := w.Open(ctx, r.GetPrivateKey(), r.GetInfo(), r.GetSealed()...)
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.WrapperOpenResponse{Plaintexts: pts}, nil
}

// AeadSeal serves ports.PointeeAEAD.Seal.
func (s *Server) AeadSeal(ctx context.Context, r *pluginpb.AeadSealRequest) (*pluginpb.AeadSealResponse, error) {
	a, err := s.aead(r.GetId())
	if err != nil {
		return nil, err
	}
	ct, err := a.Seal(ctx, r.GetKey(), r.GetNonce(), r.GetPlaintext(), r.GetAad())
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.AeadSealResponse{Ciphertext: ct}, nil
}

// AeadOpen serves ports.PointeeAEAD.Open.
func (s *Server) AeadOpen(ctx context.Context, r *pluginpb.AeadOpenRequest) (*pluginpb.AeadOpenResponse, error) {
	a, err := s.aead(r.GetId())
	if err != nil {
		return nil, err
	}
	pt, err := a.Open(ctx, r.GetKey(), r.GetNonce(), r.GetCiphertext(), r.GetAad())
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.AeadOpenResponse{Plaintext: pt}, nil
}
