// Package identitypb holds the generated Go types of identity.proto:
// identity updates and the association state of an inbox. Regenerate
// with `make proto`.
package identitypb
