// Package mlsinteroppb holds the generated Go types and gRPC stubs of the
// mlswg interop harness protocol (mls_client.proto) that
// cmd/mls-interop-client serves. Regenerate with `make proto`.
package mlsinteroppb
