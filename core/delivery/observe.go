package delivery

import (
	"errors"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// Refusal reasons, as [Observer.Refused] names them.
const (
	RefusedUnauthenticated = "unauthenticated" // publishing needs an authenticated caller
	RefusedBatch           = "batch"           // an empty batch, or more envelopes than MaxBatch
	RefusedEnvelopeSize    = "envelope_size"   // an envelope above MaxEnvelopeBytes
	RefusedTopic           = "topic"           // a malformed topic (TOPIC-001, TOPIC-002)
	RefusedPayload         = "payload"         // no payload, or one not of the topic's kind
	RefusedWelcome         = "welcome"         // a welcome that does not name its topic
	RefusedIdentityUpdate  = "identity_update" // an identity update whose key, inbox or signatures fail
	RefusedKeyPackage      = "key_package"     // a key package the validator refused (JOIN-090)
	RefusedSignature       = "signature"       // a commit-log entry whose publish signature fails (API-230)
	RefusedPublisher       = "publisher"       // a key package published by another installation (COMP-126)
	RefusedUnavailable     = "unavailable"     // the store failed, or the service has no clock
)

// Observer receives what a [Service] does, for metrics (regroupd turns
// it into Prometheus metrics). Its methods run on the goroutine of the
// call they report and must return quickly. Topic kinds are named by
// [KindName].
type Observer interface {
	// Published reports a publish the store committed: the kind of each
	// of its envelopes, and how long the call took (admission and the
	// store's transaction).
	Published(kinds []string, took time.Duration)
	// Refused reports a publish that stored nothing: the kind of the
	// envelope that failed (the first one's for a reason that concerns
	// the whole batch) and one of the Refused reasons.
	Refused(kind, reason string)
	// Delivered reports an envelope a subscription handed out, and its
	// lag: the time from its publish to its delivery.
	Delivered(lag time.Duration)
}

// KindName is the metric label of the topic kind a topic starts with:
// group_messages, welcomes, identity_updates, key_packages, commit_log,
// group_info, or unknown.
func KindName(topic []byte) string {
	if len(topic) == 0 {
		return "unknown"
	}
	switch ports.TopicKind(topic[0]) {
	case ports.TopicGroupMessages:
		return "group_messages"
	case ports.TopicWelcomes:
		return "welcomes"
	case ports.TopicIdentityUpdates:
		return "identity_updates"
	case ports.TopicKeyPackages:
		return "key_packages"
	case ports.TopicCommitLog:
		return "commit_log"
	case ports.TopicGroupInfo:
		return "group_info"
	}
	return "unknown"
}

// refusal is an admission error with the reason metrics name it by.
type refusal struct {
	reason string
	kind   string // the refused envelope's kind, when one was refused
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// because tags err with reason; nil stays nil.
func because(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &refusal{reason: reason, err: err}
}

// reasonOf returns the reason err was tagged with, or def.
func reasonOf(err error, def string) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return def
}

// noObserver is the Observer of a service built without one.
type noObserver struct{}

func (noObserver) Published([]string, time.Duration) {}
func (noObserver) Refused(string, string)            {}
func (noObserver) Delivered(time.Duration)           {}
