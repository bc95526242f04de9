// Package pluginpb holds the generated Go types and gRPC stubs of
// plugin.proto: the protocol between plugins/host and a plugin process
// served by plugins/sdk. Regenerate with `make proto`.
package pluginpb
