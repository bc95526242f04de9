package client

import (
	"sync"

	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/ports"
)

// Event is one thing that happened to the client's conversations. It is
// one of the *Event types of this package; events are delivered after the
// transaction that caused them commits, in the order they were committed.
type Event interface{ event() }

// JoinedEvent reports a conversation this installation joined from a
// Welcome (EVENT-001). The adder is read from the ratchet tree (JOIN-025).
type JoinedEvent struct {
	GroupID           []byte
	ConversationType  ports.ConversationType
	AdderInbox        string
	AdderInstallation []byte
	// Anchor is the sequence id of the commit that added this
	// installation (the Welcome's message_cursor): messages before it are
	// not this member's to read (JOIN-066).
	Anchor uint64
	// Epoch is the first epoch of the membership.
	Epoch uint64
	// Rejoined reports a Welcome that replaced state the client held
	// (JOIN-042).
	Rejoined bool
}

// MessageEvent reports a message stored for a conversation: an
// application message received, or one this installation sent once its
// publish is confirmed.
type MessageEvent struct {
	Message ports.Message
}

// MembershipEvent reports a commit that changed a conversation's members.
type MembershipEvent struct {
	GroupID []byte
	// CommitSequenceID is the commit's sequence id on the group's topic.
	CommitSequenceID uint64
	Added, Removed   []string
	// Readded are installation keys removed and added back by the commit.
	Readded [][]byte
	// RemovedSelf reports that the commit removed this installation.
	RemovedSelf bool
}

// MetadataEvent reports a commit that changed a conversation's metadata
// (name, admin lists, minimum protocol version).
type MetadataEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
	Changed          []string
}

// ForkStateEvent reports a conversation whose fork state changed. A
// transition to forked is reported once (COMP-095).
type ForkStateEvent struct {
	GroupID []byte
	State   ports.ForkState
	// SharedCommit, for a transition to forked, is the sequence id of the
	// commit at which the two logs disagree.
	SharedCommit uint64
	// Local and Remote are the disagreeing epoch authenticators.
	Local, Remote []byte
	// RemoteAuthor is the installation key of the remote entry's author.
	RemoteAuthor []byte
}

// WelcomeEvent reports a Welcome the client held for a later attempt or
// rejected for good, with the reason.
type WelcomeEvent struct {
	// SequenceID is the Welcome's sequence id on the welcome topic.
	SequenceID uint64
	GroupID    []byte
	Held       bool
	Rejected   bool
	Reason     string
}

// CommitRejectedEvent reports a commit every honest member rejects: the
// client recorded it as a terminal failure with the given result.
type CommitRejectedEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
	Result           ports.CommitResult
	Reason           string
}

// MessageMissedEvent reports an application message of the group's topic
// that the client could not decrypt or verify, after its join anchor
// (JOIN-066: messages before it are never reported), once a later
// envelope it authenticated shows the message stands in the group's
// sequence (COMP-240).
type MessageMissedEvent struct {
	GroupID    []byte
	SequenceID uint64
	Reason     string
}

// WelcomesPendingEvent reports that the delivery service did not store
// the Welcomes of this installation's merged commit (a readd's, COMP-243):
// the client keeps them and publishes them again, with a growing delay,
// until they are stored. Attempts counts the publishes so far.
type WelcomesPendingEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
	Attempts         int
	Reason           string
}

// WelcomesStoredEvent reports that Welcomes kept after a refusal were
// stored at last.
type WelcomesStoredEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
}

// RecoveryEvent reports a step of a fork repair (fork-recovery sections 6
// and 7): a readd request sent, received or dropped, a readd commit
// published or deferred.
type RecoveryEvent struct {
	recovery.Event
}

func (JoinedEvent) event()          {}
func (RecoveryEvent) event()        {}
func (MessageEvent) event()         {}
func (MembershipEvent) event()      {}
func (MetadataEvent) event()        {}
func (ForkStateEvent) event()       {}
func (WelcomeEvent) event()         {}
func (CommitRejectedEvent) event()  {}
func (WelcomesPendingEvent) event() {}
func (MessageMissedEvent) event()   {}
func (WelcomesStoredEvent) event()  {}

// eventQueue delivers events to one channel without ever blocking the
// code that emits them: events wait in a bounded queue, and when the app
// falls more than max events behind the oldest is dropped and counted.
type eventQueue struct {
	mu      sync.Mutex
	queue   []Event
	max     int
	dropped uint64
	wake    chan struct{}
	out     chan Event
	done    chan struct{}
}

func newEventQueue(max int) *eventQueue {
	q := &eventQueue{max: max, wake: make(chan struct{}, 1), out: make(chan Event), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *eventQueue) emit(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	q.mu.Lock()
	q.queue = append(q.queue, evs...)
	if over := len(q.queue) - q.max; over > 0 {
		q.queue = append(q.queue[:0:0], q.queue[over:]...)
		q.dropped += uint64(over)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) run() {
	defer close(q.out)
	for {
		q.mu.Lock()
		var next Event
		if len(q.queue) > 0 {
			next = q.queue[0]
			q.queue[0] = nil
			q.queue = q.queue[1:]
		}
		q.mu.Unlock()
		if next == nil {
			select {
			case <-q.wake:
				continue
			case <-q.done:
				return
			}
		}
		select {
		case q.out <- next:
		case <-q.done:
			return
		}
	}
}

func (q *eventQueue) droppedCount() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

func (q *eventQueue) close() {
	select {
	case <-q.done:
	default:
		close(q.done)
	}
}
