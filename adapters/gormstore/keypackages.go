package gormstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

type keyPackages struct{ t *tx }

func kpToRow(r ports.KeyPackageRecord) keyPackageRow {
	return keyPackageRow{
		Ref: r.Ref, KeyPackage: nonEmpty(r.KeyPackage), WrapperAlgorithm: r.WrapperAlgorithm,
		WrapperPublicKey:     nonEmpty(r.WrapperPublicKey),
		InitPrivateKey:       nonEmpty(r.InitPrivateKey),
		EncryptionPrivateKey: nonEmpty(r.EncryptionPrivateKey),
		WrapperPrivateKey:    nonEmpty(r.WrapperPrivateKey),
		CreatedNs:            toNs(r.CreatedAt), NotAfterNs: toNs(r.NotAfter),
		PublishSequenceID: r.PublishSequenceID, PublishConfirmedNs: toNs(r.PublishConfirmedAt),
		PublishRefused: r.PublishRefused, DestroyedNs: toNs(r.DestroyedAt),
	}
}

func kpFromRow(r keyPackageRow) ports.KeyPackageRecord {
	return ports.KeyPackageRecord{
		Ref: r.Ref, KeyPackage: nonEmpty(r.KeyPackage), WrapperAlgorithm: r.WrapperAlgorithm,
		WrapperPublicKey:     nonEmpty(r.WrapperPublicKey),
		InitPrivateKey:       nonEmpty(r.InitPrivateKey),
		EncryptionPrivateKey: nonEmpty(r.EncryptionPrivateKey),
		WrapperPrivateKey:    nonEmpty(r.WrapperPrivateKey),
		CreatedAt:            fromNs(r.CreatedNs), NotAfter: fromNs(r.NotAfterNs),
		PublishSequenceID: r.PublishSequenceID, PublishConfirmedAt: fromNs(r.PublishConfirmedNs),
		PublishRefused: r.PublishRefused, DestroyedAt: fromNs(r.DestroyedNs),
	}
}

func checkKP(op string, r ports.KeyPackageRecord) error {
	if err := checkKey(op, "key package ref", r.Ref); err != nil {
		return err
	}
	return checkU64(op, r.PublishSequenceID)
}

func (k keyPackages) Insert(ctx context.Context, r ports.KeyPackageRecord) error {
	const op = "insert key package"
	if err := checkKP(op, r); err != nil {
		return err
	}
	row := kpToRow(r)
	res := k.t.q(ctx).Clauses(doNothing("ref")).Create(&row)
	if res.Error != nil {
		return fail(ctx, op, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%s %x: %w", op, r.Ref, ports.ErrAlreadyExists)
	}
	return nil
}

func (k keyPackages) Get(ctx context.Context, ref []byte) (ports.KeyPackageRecord, error) {
	var row keyPackageRow
	if err := k.t.q(ctx).Where("ref = ?", ref).Take(&row).Error; err != nil {
		return ports.KeyPackageRecord{}, fail(ctx, "get key package", err)
	}
	return kpFromRow(row), nil
}

func (k keyPackages) ByWrapperPublicKey(ctx context.Context, pub []byte) (ports.KeyPackageRecord, error) {
	const op = "key package by wrapper public key"
	if len(pub) == 0 {
		return ports.KeyPackageRecord{}, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	var row keyPackageRow
	err := k.t.q(ctx).Where("wrapper_public_key = ?", pub).Order("created_ns, ref").Take(&row).Error
	if err != nil {
		return ports.KeyPackageRecord{}, fail(ctx, op, err)
	}
	return kpFromRow(row), nil
}

func (k keyPackages) Update(ctx context.Context, ref []byte, fn func(r *ports.KeyPackageRecord) error) error {
	const op = "update key package"
	var row keyPackageRow
	if err := k.t.q(ctx).Clauses(forUpdate).Where("ref = ?", ref).Take(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	rec := kpFromRow(row)
	if err := fn(&rec); err != nil {
		return err
	}
	if !bytes.Equal(rec.Ref, ref) {
		return fmt.Errorf("%s: the ref cannot change: %w", op, ErrBadRecord)
	}
	if err := checkKP(op, rec); err != nil {
		return err
	}
	row = kpToRow(rec)
	if err := k.t.q(ctx).Model(&keyPackageRow{}).Where("ref = ?", ref).Select("*").Omit("ref").Updates(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

func (k keyPackages) List(ctx context.Context) ([]ports.KeyPackageRecord, error) {
	var rows []keyPackageRow
	if err := k.t.q(ctx).Order("created_ns, ref").Find(&rows).Error; err != nil {
		return nil, fail(ctx, "list key packages", err)
	}
	out := make([]ports.KeyPackageRecord, len(rows))
	for i, r := range rows {
		out[i] = kpFromRow(r)
	}
	return out, nil
}

// Destroy sets the three private key columns to NULL in one statement
// (JOIN-019) and stamps the first destruction time.
func (k keyPackages) Destroy(ctx context.Context, ref []byte, at time.Time) error {
	const op = "destroy key package"
	var row keyPackageRow
	if err := k.t.q(ctx).Clauses(forUpdate).Where("ref = ?", ref).Take(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	stamp := row.DestroyedNs
	if stamp == 0 {
		stamp = toNs(at)
		if stamp == 0 {
			stamp = 1 // a zero at still records that destruction happened
		}
	}
	err := k.t.q(ctx).Model(&keyPackageRow{}).Where("ref = ?", ref).Updates(map[string]any{
		"init_private_key":       nil,
		"encryption_private_key": nil,
		"wrapper_private_key":    nil,
		"destroyed_ns":           stamp,
	}).Error
	if err != nil {
		return fail(ctx, op, err)
	}
	return nil
}
