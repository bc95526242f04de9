// Package deliverypb holds the generated Go types and gRPC stubs of
// delivery.proto: the service regroupd serves and
// adapters/grpctransport calls. Regenerate with `make proto`.
package deliverypb
