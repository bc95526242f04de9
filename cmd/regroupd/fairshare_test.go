package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// startFair starts regroupd on db serving 127.0.0.1 (the adversary's
// address) and [::1] (the honest clients'), with cfg changed by change.
// It returns the server, the adversary's and the honest address.
func startFair(t *testing.T, db string, change func(*config)) (srv *server, adversary, honest string) {
	t.Helper()
	srv, cfg := startWith(t, db, func(c *config) {
		c.Fair.ExtraListen = "[::1]:0"
		if change != nil {
			change(c)
		}
	})
	return srv, cfg.Listen, srv.extra[0]
}

// rawAuthed is a gRPC connection to addr that proved key (none when key
// is nil), with fixed 64 KiB receive windows: a client that stops reading
// holds at most that much of what the server sent.
func rawAuthed(t *testing.T, ctx context.Context, addr string, key ed25519.PrivateKey) deliverypb.DeliveryClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := deliverypb.NewDeliveryClient(cc)
	if key == nil {
		return c
	}
	ch, err := c.Challenge(ctx, &deliverypb.ChallengeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := key.Sign(nil, ch.GetChallenge(), &ed25519.Options{Context: ports.AuthContext})
	if _, err := c.Authenticate(ctx, &deliverypb.AuthenticateRequest{InstallationKey: key.Public().(ed25519.PublicKey), Signature: sig}); err != nil {
		t.Fatal(err)
	}
	return c
}

// fillTopic publishes n envelopes of about 60 KiB to a fresh group topic
// through c and returns the topic.
func fillTopic(t *testing.T, ctx context.Context, c *grpctransport.Client, n int) []byte {
	t.Helper()
	topic := transporttest.RandomGroupTopic()
	for i := 0; i < n; i++ {
		if _, err := c.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, bytes.Repeat([]byte{byte(i)}, 60<<10))}); err != nil {
			t.Fatal(err)
		}
	}
	return topic
}

// fillWelcomes is fillTopic for a Welcome topic, which anonymous
// connections may read.
func fillWelcomes(t *testing.T, ctx context.Context, c *grpctransport.Client, n int) []byte {
	t.Helper()
	inst := make([]byte, 32)
	copy(inst, transporttest.RandomGroupTopic()[1:])
	for i := 0; i < n; i++ {
		if _, err := c.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.Welcome(inst, bytes.Repeat([]byte{byte(i)}, 60<<10))}); err != nil {
			t.Fatal(err)
		}
	}
	return transporttest.Topic(ports.TopicWelcomes, inst)
}

// honestQueries runs n queries of topic from c, each within 3 s, and
// fails the test at the first that fails.
func honestQueries(t *testing.T, ctx context.Context, c *grpctransport.Client, topic []byte, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		envs, err := c.Query(qctx, topic, 0, 0)
		cancel()
		if err != nil || len(envs) == 0 {
			t.Fatalf("honest query %d under attack: %d envelopes, %v", i, len(envs), err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// smallBudget is a 1 MiB read budget of 128 KiB pages.
func smallBudget(c *config) {
	c.ReadBudgetBytes = 1 << 20
	c.MaxPageBytes = 128 << 10
}

// COMP-321 (class 1): subscriptions from one address that never read
// hold at most the address's share of the read budget; an honest reader
// from another address still queries at once.
func TestCOMP321_NonReadingSubscribersHoldOnlyTheirAddressShare(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			srv, adv, hon := startFair(t, db, func(c *config) {
				smallBudget(c)
				c.Fair.AddressShareKiB = 256
			})
			ctx := testCtx(t)
			honest := dialKey(t, hon, newKey())
			topic := fillTopic(t, ctx, honest, 24)
			for i := 0; i < 8; i++ { // eight installations, one address, none reading
				c := rawAuthed(t, ctx, adv, newKey())
				if _, err := c.Subscribe(ctx, &deliverypb.SubscribeRequest{Cursors: []*deliverypb.TopicCursor{{Topic: topic}}}); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the adversary's reads to wait for budget", func() bool { w := srv.svc.ReadBudgetWaits(); return w["address"]+w["global"] > 0 })
			honestQueries(t, ctx, honest, topic, 5)
		})
	}
}

// zeroWindow opens a raw HTTP/2 connection to addr that announces a
// receive window of zero, so the server can send no response body, and
// issues streams Query calls of topic on it. It returns when they are
// sent; the connection closes with the test.
func zeroWindow(t *testing.T, addr string, topic []byte, streams int) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	go func() { // acknowledge settings and pings; never open a window
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			mu.Lock()
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					fr.WritePing(true, f.Data)
				}
			}
			mu.Unlock()
		}
	}()
	req, _ := proto.Marshal(&deliverypb.QueryRequest{Topic: topic})
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(req)))
	body = append(body, req...)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i < streams; i++ {
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", deliverypb.Delivery_Query_FullMethodName},
			{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		id := uint32(2*i + 1)
		mu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		if err == nil {
			err = fr.WriteData(id, true, body)
		}
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	return nc
}

// COMP-322 (class 2): raw HTTP/2 connections with a zero receive window
// and 30 queries each hold at most MaxQueuedBytesPerConnection plus
// MaxReadsPerConnection pages of responses, counted in the read budget
// until written; a connection whose responses make no progress is
// closed, giving its budget back; honest readers from another address
// keep reading meanwhile.
func TestCOMP322_ZeroWindowConnectionsBoundedAndShed(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			srv, adv, hon := startFair(t, db, func(c *config) {
				smallBudget(c)
				c.ReadBudgetBytes = 2 << 20
				// Shares off: only the outbound bound stands between the
				// zero-window connections and the whole budget.
				c.Fair.ConnectionShareKiB, c.Fair.IdentityShareKiB, c.Fair.AddressShareKiB, c.Fair.AnonymousShareKiB = -1, -1, -1, -1
				c.Fair.MaxQueuedKiB, c.Fair.MaxReadsPerConnection = 256, 2
				c.Fair.ResponseProgressTimeout = 400 * time.Millisecond
				c.SlowReaderTimeout = 5 * time.Second
			})
			ctx := testCtx(t)
			honest := dialKey(t, hon, newKey())
			topic := fillWelcomes(t, ctx, honest, 24)
			for i := 0; i < 2; i++ {
				zeroWindow(t, adv, topic, 30)
			}
			// Each holds at most 256 KiB + 2 pages of 128 KiB (and the
			// 120 KiB response that passed the 256 KiB mark).
			bound := int64(2 * (256 + 2*128 + 128) << 10)
			waitFor(t, "responses queued on the zero-window connections", func() bool { return srv.svc.ReadBudgetInUse() > 256<<10 })
			if in := srv.svc.ReadBudgetInUse(); in > bound {
				t.Errorf("zero-window connections hold %d bytes of responses, bound %d", in, bound)
			}
			honestQueries(t, ctx, honest, topic, 5)
			waitFor(t, "the zero-window connections to be shed", func() bool {
				return srv.rpc.Stats().Refused[grpctransport.LimitQueuedBytes] >= 2
			})
			waitFor(t, "their held budget to come back", func() bool { return srv.svc.ReadBudgetInUse() == 0 })
		})
	}
}

// COMP-326 (class 3): one address gets a bounded number of connections,
// subscriptions and cursors, anonymous ones the fewest, and the server
// bounds the cursors of all; another address is still served.
func TestCOMP326_OneAddressCannotHoardConnectionsOrSubscriptions(t *testing.T) {
	t.Parallel()
	srv, adv, hon := startFair(t, "sqlite", func(c *config) {
		c.Fair.MaxConnectionsPerAddress = 3
		c.Fair.AnonymousSubscriptionsPerAddress = 2
		c.Fair.MaxSubscriptionsPerAddress = 3
		c.Fair.MaxCursorsTotal = 40
	})
	ctx := testCtx(t)
	welcomes := func(n int) []ports.TopicCursor {
		var cs []ports.TopicCursor
		for i := 0; i < n; i++ {
			cs = append(cs, ports.TopicCursor{Topic: transporttest.Topic(ports.TopicWelcomes, transporttest.RandomGroupTopic()[1:])})
		}
		return cs
	}
	refusedBy := func(err error, limit string) {
		t.Helper()
		if !errors.Is(err, ports.ErrRateLimited) || !strings.Contains(err.Error(), limit) {
			t.Fatalf("got %v, want a refusal by %s", err, limit)
		}
	}
	anon := dialKey(t, adv, nil)
	for i := 0; i < 2; i++ {
		if _, err := anon.Subscribe(ctx, welcomes(1)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := anon.Subscribe(ctx, welcomes(1))
	refusedBy(err, grpctransport.LimitAnonymousSubscriptionsPerAddr)
	authed := dialKey(t, adv, newKey())
	if _, err := authed.Publish(ctx, transporttestBatch(transporttest.RandomGroupTopic())); err != nil { // authenticates
		t.Fatal(err)
	}
	if _, err := authed.Subscribe(ctx, welcomes(1)); err != nil {
		t.Fatal(err)
	}
	_, err = authed.Subscribe(ctx, welcomes(1))
	refusedBy(err, grpctransport.LimitSubscriptionsPerAddress)
	// A third connection from the address is served, a fourth closed.
	if _, err := dialKey(t, adv, newKey()).HighestSequenceID(ctx, transporttest.RandomGroupTopic()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := dialKey(t, adv, newKey()).HighestSequenceID(short, transporttest.RandomGroupTopic()); err == nil {
		t.Fatal("a fourth connection from one address was served")
	}
	// Another address subscribes; the server's cursor cap holds for all.
	other := dialKey(t, hon, newKey())
	if _, err := other.Subscribe(ctx, welcomes(30)); err != nil {
		t.Fatal(err)
	}
	_, err = other.Subscribe(ctx, welcomes(20))
	refusedBy(err, grpctransport.LimitCursors)
	st := srv.rpc.Stats()
	for _, l := range []string{grpctransport.LimitAnonymousSubscriptionsPerAddr, grpctransport.LimitSubscriptionsPerAddress,
		grpctransport.LimitConnectionsPerAddress, grpctransport.LimitCursors} {
		if st.Refused[l] == 0 {
			t.Errorf("refusals by %s not counted: %v", l, st.Refused)
		}
	}
}

// COMP-323 (class 4): QueryNewest is charged by the bytes it returns, like
// Query: a connection reading a 60 KiB envelope over and over runs out of
// tokens three times sooner than one paying one token per call.
func TestCOMP323_QueryNewestChargedByBytes(t *testing.T) {
	t.Parallel()
	_, adv, hon := startFair(t, "sqlite", func(c *config) { c.RatePerSecond, c.Burst = 0.5, 30 })
	ctx := testCtx(t)
	topic := fillWelcomes(t, ctx, dialKey(t, hon, newKey()), 1)
	c := dialKey(t, adv, nil)
	for i := 0; i < 15; i++ {
		_, err := c.QueryNewest(ctx, topic)
		if errors.Is(err, ports.ErrRateLimited) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("15 QueryNewest calls of a 60 KiB envelope fit a 30-token bucket: they are not charged by bytes")
}

// COMP-324 (class 5): an identity update or a key package published again
// is answered with the stored one's sequence id and stored once; a
// replayed old key package does not become the newest.
func TestCOMP324_ReplaysOfIdentityUpdatesAndKeyPackagesStoredOnce(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			_, addr, _ := startFair(t, db, nil)
			ctx := testCtx(t)
			_, recovery, _ := ed25519.GenerateKey(nil)
			u, err := identity.NewAdd(recovery, newKey(), time.Now().UnixNano())
			if err != nil {
				t.Fatal(err)
			}
			inbox := transporttest.Topic(ports.TopicIdentityUpdates, identityTopicID(recovery))
			env := &backendpb.ClientEnvelope{TargetTopic: inbox, Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}}
			pub := dialKey(t, addr, newKey())
			var first uint64
			for i := 0; i < 20; i++ {
				ids, err := pub.Publish(ctx, []*backendpb.ClientEnvelope{env})
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = ids[0]
				} else if ids[0] != first {
					t.Fatalf("replay %d stored as %d, first was %d", i, ids[0], first)
				}
			}
			if envs, err := pub.Query(ctx, inbox, 0, 0); err != nil || len(envs) != 1 {
				t.Fatalf("identity topic holds %d envelopes after 20 publishes of one update (%v)", len(envs), err)
			}
			inst, oldKP, priv := realKeyPackageWithKey(t, curve25519, wrapperKey(t))
			own := dialKey(t, addr, priv)
			old, err := own.Publish(ctx, []*backendpb.ClientEnvelope{kpEnvelope(inst, oldKP)})
			if err != nil {
				t.Fatal(err)
			}
			newer := refreshKeyPackage(t, priv)
			if _, err := own.Publish(ctx, []*backendpb.ClientEnvelope{kpEnvelope(inst, newer)}); err != nil {
				t.Fatal(err)
			}
			again, err := own.Publish(ctx, []*backendpb.ClientEnvelope{kpEnvelope(inst, oldKP)})
			if err != nil || again[0] != old[0] {
				t.Fatalf("replayed key package stored as %v (first %v): %v", again, old, err)
			}
			e, err := own.QueryNewest(ctx, transporttest.Topic(ports.TopicKeyPackages, inst))
			if err != nil || !bytes.Equal(e.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized(), newer) {
				t.Fatalf("newest key package after a replay of the old one: %v", err)
			}
		})
	}
}

// COMP-325 (class 6): one installation's Welcomes stop at its quota with
// a ResourceExhausted refusal that names the storage quota; Welcomes are
// kept 30 days by default.
func TestCOMP325_WelcomeStorageQuota(t *testing.T) {
	t.Parallel()
	srv, addr, _ := startFair(t, "sqlite", func(c *config) {
		c.Fair.QuotaWelcomes = 1
		c.HealthListen = "127.0.0.1:0"
	})
	if d := testConfig(t, "sqlite").Retention[ports.TopicWelcomes]; d != 30*24*time.Hour {
		t.Errorf("default Welcome retention %s, want 720h", d)
	}
	ctx := testCtx(t)
	c := dialKey(t, addr, newKey())
	inst := transporttest.RandomGroupTopic()[1:]
	for i := 0; ; i++ {
		_, err := c.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.Welcome(inst, bytes.Repeat([]byte{1}, 60<<10))})
		if err == nil {
			if i > 20 {
				t.Fatalf("%d Welcomes of 60 KiB stored under a 1 MiB quota", i+1)
			}
			continue
		}
		if !errors.Is(err, ports.ErrRateLimited) || !strings.Contains(err.Error(), "storage quota") {
			t.Fatalf("Welcome %d: %v, want ResourceExhausted naming the storage quota", i, err)
		}
		break
	}
	// Another installation still stores.
	if _, err := dialKey(t, addr, newKey()).Publish(ctx, []*backendpb.ClientEnvelope{transporttest.Welcome(inst, []byte("hi"))}); err != nil {
		t.Fatal(err)
	}
	if n := scrapeMetrics(t, srv)[`regroupd_publish_refusals_total{kind="welcomes",reason="quota"}`]; n < 1 {
		t.Fatalf("quota refusals in /metrics: %v", n)
	}
}

// COMP-327 (class 7): the connections of one address draw from the
// address's bucket before the server's, so they cannot spend the global
// bucket for another address's client.
func TestCOMP327_AddressBucketProtectsTheGlobalOne(t *testing.T) {
	t.Parallel()
	srv, adv, hon := startFair(t, "sqlite", func(c *config) {
		c.GlobalRate, c.GlobalBurst = 1, 100
		c.Fair.AddressRate, c.Fair.AddressBurst = 1, 20
	})
	ctx := testCtx(t)
	topic := transporttest.RandomGroupTopic()
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		c := dialKey(t, adv, nil)
		for j := 0; j < 40; j++ {
			wg.Add(1)
			go func() { // refusals are answered late (COMP-331): flood in parallel
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				c.HighestSequenceID(cctx, transporttest.Topic(ports.TopicWelcomes, topic[1:]))
			}()
		}
	}
	wg.Wait()
	honest := dialKey(t, hon, newKey())
	for i := 0; i < 10; i++ {
		if _, err := honest.HighestSequenceID(ctx, topic); err != nil {
			t.Fatalf("honest call %d after one address's flood: %v", i, err)
		}
	}
	if srv.rpc.Stats().Refused[grpctransport.LimitRateAddress] == 0 {
		t.Fatal("address bucket refusals not counted")
	}
}

// COMP-320 (class 8): a small-order installation key with the signature
// that verifies under it for any message does not authenticate.
func TestCOMP320_SmallOrderKeyDoesNotAuthenticate(t *testing.T) {
	t.Parallel()
	_, addr, _ := startFair(t, "sqlite", nil)
	ctx := testCtx(t)
	c := rawAuthed(t, ctx, addr, nil)
	if _, err := c.Challenge(ctx, &deliverypb.ChallengeRequest{}); err != nil {
		t.Fatal(err)
	}
	identityPoint := append([]byte{1}, make([]byte, 31)...)
	sig := append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...) // R = identity, S = 0
	if !ed25519.Verify(identityPoint, []byte("any message"), sig) {
		t.Fatal("the forged signature does not verify under crypto/ed25519: the test proves nothing")
	}
	_, err := c.Authenticate(ctx, &deliverypb.AuthenticateRequest{InstallationKey: identityPoint, Signature: sig})
	if err == nil || !strings.Contains(err.Error(), "small order") {
		t.Fatalf("small-order key: %v, want Unauthenticated naming small order", err)
	}
}

// COMP-328 (class 8): the health listener closes keep-alive connections
// idle for -health-idle-timeout.
func TestCOMP328_HealthClosesIdleConnections(t *testing.T) {
	t.Parallel()
	srv, _ := startWith(t, "sqlite", func(c *config) {
		c.HealthListen = "127.0.0.1:0"
		c.Fair.HealthIdleTimeout = 200 * time.Millisecond
	})
	nc, err := net.Dial("tcp", srv.healthLn.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	if _, err := nc.Read(buf); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := nc.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("an idle keep-alive connection stayed open 5 s")
			}
			return // closed by the server
		}
	}
}

// COMP-329 (class 8): a published key package costs KeyPackageCost extra
// tokens for its admission checks.
func TestCOMP329_KeyPackageAdmissionCharged(t *testing.T) {
	t.Parallel()
	_, addr, _ := startFair(t, "sqlite", func(c *config) {
		c.RatePerSecond, c.Burst = 0.5, 50
		c.Fair.KeyPackageCost = 30
	})
	ctx := testCtx(t)
	inst, kp, priv := realKeyPackageWithKey(t, curve25519, wrapperKey(t))
	c := dialKey(t, addr, priv)
	var err error
	for i := 0; i < 2 && err == nil; i++ {
		_, err = c.Publish(ctx, []*backendpb.ClientEnvelope{kpEnvelope(inst, kp)})
	}
	if !errors.Is(err, ports.ErrRateLimited) {
		t.Fatalf("second key package within a 50-token burst: %v, want a refusal by its admission cost", err)
	}
}

const curve25519 = contentspb.WelcomeWrapperAlgorithm_WELCOME_WRAPPER_ALGORITHM_CURVE25519

func wrapperKey(t *testing.T) []byte {
	t.Helper()
	pub, _, err := hpkewrap.NewCurve25519().GenerateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// identityTopicID is the inbox id of a recovery key: SHA-256 of its
// public key.
func identityTopicID(recovery ed25519.PrivateKey) []byte {
	sum := sha256.Sum256(recovery.Public().(ed25519.PublicKey))
	return sum[:]
}

// refreshKeyPackage returns a new key package of the installation priv.
func refreshKeyPackage(t *testing.T, priv ed25519.PrivateKey) []byte {
	t.Helper()
	engine, err := mls.New(mls.Options{SignaturePrivateKey: priv.Seed()})
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := proto.Marshal(&contentspb.WelcomeWrapperEncryption{PubKey: wrapperKey(t), Algorithm: curve25519})
	b, err := engine.CreateKeyPackage(context.Background(), ports.KeyPackageOptions{
		Credential: []byte("inbox"), SignaturePrivateKey: priv.Seed(),
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * 7 * 24 * time.Hour),
		Extensions: []ports.Extension{{Type: 0xff03, Data: ext}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.KeyPackage
}

// COMP-331: a client that calls again at once after each refusal gets its
// refusals no faster than its bucket refills: over half a second of a
// 2-token-per-second bucket it sees a handful, not thousands.
func TestCOMP331_RefusalsAnsweredWhenTheBucketRefills(t *testing.T) {
	t.Parallel()
	_, addr, _ := startFair(t, "sqlite", func(c *config) { c.RatePerSecond, c.Burst = 2, 2 })
	ctx := testCtx(t)
	c := rawAuthed(t, ctx, addr, nil)
	refused := 0
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		if _, err := c.HighestSequenceId(ctx, &deliverypb.HighestSequenceIdRequest{Topic: transporttest.RandomGroupTopic()}); err != nil {
			refused++
		}
	}
	if refused == 0 || refused > 20 {
		t.Fatalf("%d refusals in half a second of a 2/s bucket, want a handful", refused)
	}
}
