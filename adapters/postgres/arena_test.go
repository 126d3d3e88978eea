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

// TestByteArenaStartsSmall: a read of a few events takes a small block; blocks double up to
// arenaBlock as a read goes on.
func TestByteArenaStartsSmall(t *testing.T) {
	t.Parallel()
	var a byteArena
	a.copy([]byte("one event"))
	assert.Equal(t, arenaFirstBlock, cap(a.block))
	var caps []int
	for range 64 {
		a.copy(bytes.Repeat([]byte{1}, 1000))
		if n := len(caps); n == 0 || caps[n-1] != cap(a.block) {
			caps = append(caps, cap(a.block))
		}
	}
	assert.Equal(t, []int{arenaFirstBlock, 2 * arenaFirstBlock, 4 * arenaFirstBlock, 8 * arenaFirstBlock, arenaBlock}, caps)
}
