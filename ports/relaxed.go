package ports

import "context"

// RelaxedStore is an optional interface of a [Store] that can commit a
// transaction without waiting for its writes to reach stable storage.
//
// TxRelaxed is [Store.Tx] with a commit that need not wait for the disk.
// Once committed, a relaxed transaction survives a crash of the process
// that ran it (SIGKILL) like any other; what a crash of the machine or of
// a database server, or a power loss, may cost depends on the store and
// is documented by it: at most relaxed transactions committed after the
// last transaction that was not relaxed, each lost whole, never a
// transaction that was not relaxed. A caller relaxes only writes it can
// redo from what stays durable, such as a read position it can read
// again.
type RelaxedStore interface {
	TxRelaxed(ctx context.Context, fn func(tx Tx) error) error
}
