package main

import (
	"context"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// faultableClient builds the client of installation in on store and tr
// from the root package's providers, as an app without wire does, with
// its MLS engine behind the fault decorator that the demo and
// `sync --inject-fault` arm. With nothing armed the decorator is the
// engine itself.
func faultableClient(ctx context.Context, store ports.Store, in identity.Installation, tr ports.Transport,
	clk ports.Clock, opts *client.Options) (*client.Client, *mlsfault.Engine, func(), error) {
	inner, err := regroup.ProvideEngine(in)
	if err != nil {
		return nil, nil, nil, err
	}
	resolver, err := regroup.ProvideResolver(store, tr, clk)
	if err != nil {
		return nil, nil, nil, err
	}
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		return nil, nil, nil, err
	}
	eng := mlsfault.Wrap(inner)
	deps := client.Deps{Store: store, MLS: eng, Transport: tr, Identity: resolver, Clock: clk, Algorithms: reg, Installation: in}
	c, closeClient, err := regroup.ProvideClient(ctx, deps, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, eng, closeClient, nil
}
