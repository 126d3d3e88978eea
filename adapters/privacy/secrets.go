package privacy

// Secrets kept in the database (a provider's webhook signing secret that `bookingledger providers
// connect` created) are sealed directly with the newest master key: there is nothing to erase per
// person, so no data key sits between them. The label (the provider's name) is associated data, so a
// sealed secret moved to another provider's row does not open.

// SealSecret seals secret under the newest master key, bound to label; it returns the key's id and
// the sealed bytes to store beside it.
func (k *Keyring) SealSecret(label string, secret []byte) (kekID string, sealed []byte) {
	e := k.keks[0]
	nonce := randomBytes(e.aead.NonceSize())
	return e.id, e.aead.Seal(nonce, nonce, secret, secretAD(label))
}

// OpenSecret opens what SealSecret sealed with master key kekID under label. It fails with
// ErrUnknownMasterKey when that key is no longer configured, ErrWrongMasterKey when it does not open.
func (k *Keyring) OpenSecret(kekID, label string, sealed []byte) ([]byte, error) {
	return k.open(kekID, sealed, secretAD(label))
}

func secretAD(label string) []byte { return []byte("bl-secret\x00" + label) }
