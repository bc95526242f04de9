package deliverydb

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkAppend measures one-envelope Append transactions (shared
// counter update, topic row upsert, insert) on SQLite; BenchmarkRawInsertReference is the same
// database's plain single-row insert in the same run, the reference to
// read it against.
func BenchmarkAppend(b *testing.B) {
	s, err := OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "b.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, t, payload := context.Background(), topic(), make([]byte, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Append(ctx, []ports.NewStoredEnvelope{{Topic: t, Envelope: payload, ServerTimestampNS: 1}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

func BenchmarkRawInsertReference(b *testing.B) {
	s, err := OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "b.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.db.Exec(`CREATE TABLE raw_ref (id INTEGER PRIMARY KEY, topic BLOB, payload BLOB)`).Error; err != nil {
		b.Fatal(err)
	}
	t, payload := topic(), make([]byte, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.db.Exec(`INSERT INTO raw_ref (topic, payload) VALUES (?, ?)`, blob(t), blob(payload)).Error; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// BenchmarkAppendPostgresParallel measures one-envelope Appends by 16
// concurrent writers over 8 topics on PostgreSQL (topic lock, shared
// sequence, insert); BenchmarkPerTopicCounterReferencePostgres runs, in the
// same schema and envelope table, the transaction a per-topic counter
// needs (counter upsert returning the id, the same insert), the reference
// to read the shared counter's cost against. Both need REGROUP_POSTGRES_DSN.
func BenchmarkAppendPostgresParallel(b *testing.B) {
	s := benchPG(b)
	topics := benchTopics()
	payload := make([]byte, 256)
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := topics[n.Add(1)%int64(len(topics))]
			if _, err := s.Append(context.Background(), []ports.NewStoredEnvelope{{Topic: t, Envelope: payload, ServerTimestampNS: 1}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

func BenchmarkPerTopicCounterReferencePostgres(b *testing.B) {
	s := benchPG(b)
	if err := s.db.Exec(`CREATE TABLE ref_topics (topic BYTEA PRIMARY KEY, last_id BIGINT NOT NULL)`).Error; err != nil {
		b.Fatal(err)
	}
	topics := benchTopics()
	payload := make([]byte, 256)
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := topics[n.Add(1)%int64(len(topics))]
			err := s.db.Transaction(func(tx *gorm.DB) error {
				var id int64
				err := tx.Raw(`INSERT INTO ref_topics (topic, last_id) VALUES (?, 1)
					ON CONFLICT (topic) DO UPDATE SET last_id = ref_topics.last_id + 1 RETURNING last_id`, blob(t)).Row().Scan(&id)
				if err != nil {
					return err
				}
				return tx.CreateInBatches([]envelopeRow{{Topic: t, SequenceID: id, ServerTimestampNS: 1, Envelope: payload}}, 200).Error
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

func benchPG(b *testing.B) *Store {
	dsn := os.Getenv("REGROUP_POSTGRES_DSN")
	if dsn == "" {
		b.Skip("REGROUP_POSTGRES_DSN unset")
	}
	s, err := OpenPostgres(context.Background(), dsn, &Options{Schema: FreshSchemaName()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.DropSchema(context.Background()); s.Close() })
	return s
}

func benchTopics() [][]byte {
	topics := make([][]byte, 8)
	for i := range topics {
		topics[i] = topic()
	}
	return topics
}
