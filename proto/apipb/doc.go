// Package apipb holds the generated Go types of mls.proto: the MLS
// messages as they travel inside envelopes (welcome pointers, key
// packages with their wrapper keys). Regenerate with `make proto`.
package apipb
