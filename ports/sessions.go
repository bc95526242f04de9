package ports

// SessionCounter is an optional interface of a [Transport] whose
// connections to the delivery service authenticate one by one: Sessions
// returns how many times it has authenticated so far. A new session may
// reach a delivery service restored from a backup, which no longer holds
// what it held before (COMP-463): a client that sees the count change
// checks that its key package is still served. Callers detect it with a
// type assertion.
type SessionCounter interface {
	Sessions() uint64
}
