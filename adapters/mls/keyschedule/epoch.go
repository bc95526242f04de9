package keyschedule

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
)

// Epoch holds the secrets of one epoch (§8, Table 4). JoinerSecret and
// WelcomeSecret are what a Welcome into this epoch is built from; InitSecret
// is the init_secret of the next epoch.
type Epoch struct {
	JoinerSecret       []byte
	WelcomeSecret      []byte
	EpochSecret        []byte
	SenderDataSecret   []byte
	EncryptionSecret   []byte
	ExporterSecret     []byte
	ExternalSecret     []byte
	ConfirmationKey    []byte
	MembershipKey      []byte
	ResumptionPSK      []byte
	EpochAuthenticator []byte
	InitSecret         []byte
}

func (s *scheduler) check(name string, b []byte) {
	if s.err == nil && len(b) != s.suite.HashSize() {
		s.err = fmt.Errorf("%w: %s of %d bytes, want %d", ciphersuite.ErrInvalidKey, name, len(b), s.suite.HashSize())
	}
}

type scheduler struct {
	suite *ciphersuite.Suite
	err   error
}

func (s *scheduler) derive(secret []byte, label string) []byte {
	if s.err != nil {
		return nil
	}
	out, err := s.suite.DeriveSecret(secret, label)
	s.err = err
	return out
}

func (s *scheduler) expand(secret []byte, label string, context []byte) []byte {
	if s.err != nil {
		return nil
	}
	out, err := s.suite.ExpandWithLabel(secret, label, context, s.suite.HashSize())
	s.err = err
	return out
}

// Derive runs the key schedule for a new epoch (§8): initSecret is the
// previous epoch's init_secret (random for a new group), commitSecret and
// pskSecret are all-zero Nh-byte strings when absent (nil means zero), and
// groupContext is the encoded GroupContext of the new epoch.
func Derive(suite *ciphersuite.Suite, initSecret, commitSecret, pskSecret, groupContext []byte) (*Epoch, error) {
	s := &scheduler{suite: suite}
	commitSecret = orZero(suite, commitSecret)
	s.check("init_secret", initSecret)
	s.check("commit_secret", commitSecret)
	if s.err != nil {
		return nil, s.err
	}
	joiner := s.expand(suite.Extract(initSecret, commitSecret), "joiner", groupContext)
	if s.err != nil {
		return nil, s.err
	}
	return FromJoiner(suite, joiner, pskSecret, groupContext)
}

// FromJoiner runs the key schedule from joiner_secret, as a joiner does
// after decrypting its GroupSecrets (§8, §12.4.3.1).
func FromJoiner(suite *ciphersuite.Suite, joinerSecret, pskSecret, groupContext []byte) (*Epoch, error) {
	s := &scheduler{suite: suite}
	pskSecret = orZero(suite, pskSecret)
	s.check("joiner_secret", joinerSecret)
	s.check("psk_secret", pskSecret)
	if s.err != nil {
		return nil, s.err
	}
	member := suite.Extract(joinerSecret, pskSecret)
	e := &Epoch{JoinerSecret: append([]byte(nil), joinerSecret...)}
	e.WelcomeSecret = s.derive(member, "welcome")
	e.EpochSecret = s.expand(member, "epoch", groupContext)
	clear(member)
	e.SenderDataSecret = s.derive(e.EpochSecret, "sender data")
	e.EncryptionSecret = s.derive(e.EpochSecret, "encryption")
	e.ExporterSecret = s.derive(e.EpochSecret, "exporter")
	e.ExternalSecret = s.derive(e.EpochSecret, "external")
	e.ConfirmationKey = s.derive(e.EpochSecret, "confirm")
	e.MembershipKey = s.derive(e.EpochSecret, "membership")
	e.ResumptionPSK = s.derive(e.EpochSecret, "resumption")
	e.EpochAuthenticator = s.derive(e.EpochSecret, "authentication")
	e.InitSecret = s.derive(e.EpochSecret, "init")
	if s.err != nil {
		return nil, fmt.Errorf("key schedule: %w", s.err)
	}
	return e, nil
}

func orZero(s *ciphersuite.Suite, b []byte) []byte {
	if b == nil {
		return make([]byte, s.HashSize())
	}
	return b
}

// WelcomeKeyNonce derives the AEAD key and nonce that encrypt a Welcome's
// GroupInfo from welcome_secret (§12.4.3.1).
func WelcomeKeyNonce(s *ciphersuite.Suite, welcomeSecret []byte) (key, nonce []byte, err error) {
	if key, err = s.ExpandWithLabel(welcomeSecret, "key", nil, s.KeySize()); err != nil {
		return nil, nil, err
	}
	if nonce, err = s.ExpandWithLabel(welcomeSecret, "nonce", nil, s.NonceSize()); err != nil {
		return nil, nil, err
	}
	return key, nonce, nil
}

// Export is MLS-Exporter(label, context, length) over exporter_secret (§8.5).
func Export(s *ciphersuite.Suite, exporterSecret []byte, label string, context []byte, length int) ([]byte, error) {
	sec, err := s.DeriveSecret(exporterSecret, label)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer clear(sec)
	out, err := s.ExpandWithLabel(sec, "exported", s.Hash(context), length)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return out, nil
}

// ExternalKeyPair derives the HPKE key pair of external_secret (§8.3);
// the public half is the external_pub of the GroupInfo extension.
func ExternalKeyPair(s *ciphersuite.Suite, externalSecret []byte) (priv, pub []byte, err error) {
	return s.DeriveHPKEKeyPair(externalSecret)
}

// ExternalInitSecret derives the init_secret an external joiner and the
// group share: the joiner encapsulates to external_pub and exports 'MLS 1.0
// external init secret' (§8.3). On the group side, see
// [ExternalInitSecretFromKEMOutput].
func ExternalInitSecret(s *ciphersuite.Suite, externalPub []byte) (kemOutput, initSecret []byte, err error) {
	return s.HPKEExport(externalPub, nil, []byte(ciphersuite.LabelPrefix+"external init secret"), s.HashSize())
}

// ExternalInitSecretFromKEMOutput is the group side of [ExternalInitSecret].
func ExternalInitSecretFromKEMOutput(s *ciphersuite.Suite, externalPriv, kemOutput []byte) ([]byte, error) {
	return s.HPKEExportOpen(externalPriv, nil, kemOutput, []byte(ciphersuite.LabelPrefix+"external init secret"), s.HashSize())
}
