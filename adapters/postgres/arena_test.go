package postgres

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestByteArenaCopiesStayApart: the slices byteArena hands out share blocks, so each must be capped at
// its own length: appending to one must never write into the next one's bytes.
func TestByteArenaCopiesStayApart(t *testing.T) {
	t.Parallel()
	var a byteArena
	assert.Nil(t, a.copy(nil), "NULL stays nil")
	empty := a.copy([]byte{})
	assert.NotNil(t, empty, "empty stays non-nil")
	assert.Empty(t, empty)

	first := a.copy([]byte("first"))
	second := a.copy([]byte("second"))
	_ = append(first, "XXXXXX"...)
	assert.Equal(t, "first", string(first))
	assert.Equal(t, "second", string(second), "an append to the first copy reached the second")

	big := bytes.Repeat([]byte{7}, 3*arenaBlock)
	assert.Equal(t, big, a.copy(big), "a value larger than a block gets a block of its own")
	assert.Equal(t, "second", string(second))
}
