package privacy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// EnvMasterKey names the key-encryption keys: "id:base64,…", newest first; each key is 32 random bytes
// (AES-256). The newest wraps new data keys; the others only unwrap, until `keys rewrap` retires them.
const EnvMasterKey = "BOOKINGLEDGER_MASTER_KEY"

// Errors of the master key configuration and of opening sealed data.
var (
	ErrNoMasterKey      = errors.New(EnvMasterKey + " is not set: receipt bodies are stored encrypted and cannot be written or read without it (generate one with `bookingledger keys generate`)")
	ErrMasterKeyFormat  = errors.New(EnvMasterKey + " is malformed (want id:base64 of 32 bytes, comma-separated, newest first)")
	ErrUnknownMasterKey = errors.New("data key wrapped by a master key that is not configured")
	ErrWrongMasterKey   = errors.New("master key does not open the data keys wrapped by it (wrong key for its id?)")
	ErrShredded         = errors.New("data key erased: the data is gone")
)

// kek is one key-encryption key.
type kek struct {
	id   string
	aead cipher.AEAD
}

// Keyring holds the configured master keys, newest first.
type Keyring struct{ keks []kek }

// ParseKeyring reads EnvMasterKey's value. Empty is ErrNoMasterKey: nothing is ever stored in plain
// text for want of a key.
func ParseKeyring(s string) (*Keyring, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, ErrNoMasterKey
	}
	k := &Keyring{}
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("%w: entry %d has no id (want id:base64)", ErrMasterKeyFormat, i+1)
		}
		if err := ValidateKeyID(id); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrMasterKeyFormat, i+1, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: id %q named twice", ErrMasterKeyFormat, id)
		}
		seen[id] = true
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			if raw, err = base64.RawURLEncoding.DecodeString(b64); err != nil {
				return nil, fmt.Errorf("%w: key %q is not base64", ErrMasterKeyFormat, id)
			}
		}
		if len(raw) != 32 {
			return nil, fmt.Errorf("%w: key %q has %d bytes, want 32", ErrMasterKeyFormat, id, len(raw))
		}
		aead, err := newAEAD(raw)
		if err != nil {
			return nil, err
		}
		k.keks = append(k.keks, kek{id: id, aead: aead})
	}
	return k, nil
}

// ErrKeyID: a master key id that cannot be one (ValidateKeyID).
var ErrKeyID = errors.New("a master key id is 1 to 64 printable ASCII characters other than ':' and ','")

// ValidateKeyID checks a master key id. The id is stored, in a text column, with every data key the
// key wraps: one with a NUL or a byte that is not UTF-8 would let serve start and then fail every
// seal. Spaces and the list's separators (':' and ',') are refused too.
func ValidateKeyID(id string) error {
	if id == "" || len(id) > 64 {
		return ErrKeyID
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == ':' || c == ',' {
			return fmt.Errorf("%w: %q", ErrKeyID, id)
		}
	}
	return nil
}

// GenerateMasterKey returns a fresh "id:base64" entry for EnvMasterKey.
func GenerateMasterKey(id string) string {
	return id + ":" + base64.StdEncoding.EncodeToString(randomBytes(32))
}

// Newest is the id of the key that wraps new data keys.
func (k *Keyring) Newest() string { return k.keks[0].id }

// IDs lists the configured key ids, newest first.
func (k *Keyring) IDs() []string {
	out := make([]string, len(k.keks))
	for i, e := range k.keks {
		out[i] = e.id
	}
	return out
}

// wrap seals a data key with the newest master key; the subject is associated data, so a wrapped key
// moved to another subject's row does not open.
func (k *Keyring) wrap(subject string, dataKey []byte) (kekID string, wrapped []byte) {
	e := k.keks[0]
	nonce := randomBytes(e.aead.NonceSize())
	return e.id, e.aead.Seal(nonce, nonce, dataKey, []byte("bl-data-key\x00"+subject))
}

// unwrap opens a data key wrapped by master key kekID.
func (k *Keyring) unwrap(kekID, subject string, wrapped []byte) ([]byte, error) {
	return k.open(kekID, wrapped, []byte("bl-data-key\x00"+subject))
}

// open opens what master key kekID sealed with associated data ad (nonce first).
func (k *Keyring) open(kekID string, sealed, ad []byte) ([]byte, error) {
	for _, e := range k.keks {
		if e.id != kekID {
			continue
		}
		n := e.aead.NonceSize()
		if len(sealed) < n {
			return nil, fmt.Errorf("%w: %q", ErrWrongMasterKey, kekID)
		}
		plain, err := e.aead.Open(nil, sealed[:n], sealed[n:], ad)
		if err != nil {
			return nil, fmt.Errorf("%w: %q", ErrWrongMasterKey, kekID)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("%w: %q (configured: %s)", ErrUnknownMasterKey, kekID, strings.Join(k.IDs(), ", "))
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("aes-gcm: %w", err)
	}
	return aead, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+); it panics rather
	return b
}
