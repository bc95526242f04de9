// Package backendpb holds the generated Go types of envelopes.proto: the
// client and originator envelopes the delivery service stores and
// serves, and the topics they name. Regenerate with `make proto`.
package backendpb
