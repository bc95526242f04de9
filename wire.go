//go:build wireinject

package regroup

import (
	"context"

	"github.com/google/wire"

	"github.com/regroup-mls/regroup/core/client"
)

// NewEmbedded builds a client whose state lives in cfg.Dir/client.db and
// whose delivery service runs in-process on SQLite (cfg.Service, or one
// opened in cfg.Dir). The cleanup closes the client, the delivery service
// it opened, and the store.
func NewEmbedded(ctx context.Context, cfg EmbeddedConfig) (*client.Client, func(), error) {
	wire.Build(
		wire.FieldsOf(new(EmbeddedConfig), "Identity", "Options", "Logger"),
		embeddedClock, embeddedStore, ProvideEmbeddedService, ProvideMemTransport,
		ProvideInstallation, ProvideEngine, ProvideAlgorithms, ProvideResolver, ProvideDeps, ProvideClient,
	)
	return nil, nil, nil
}

// NewNetworked builds a client whose state lives in PostgreSQL or SQLite
// and which reaches a regroupd over gRPC. The cleanup closes the client,
// the connection and the store.
func NewNetworked(ctx context.Context, cfg NetworkedConfig) (*client.Client, func(), error) {
	wire.Build(
		wire.FieldsOf(new(NetworkedConfig), "Identity", "Options", "Logger"),
		networkedClock, networkedStore, networkedTransport,
		ProvideInstallation, ProvideEngine, ProvideAlgorithms, ProvideResolver, ProvideDeps, ProvideClient,
	)
	return nil, nil, nil
}
