package flow

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/urlflow/urlflow/state"
)

// A user's own index lists the user's elicitations in the order of their entries
// (indexEntry: creation time, then ID), as the deployment-wide buckets do, but each
// entry is packed into 46 bytes: the creation time in 6 bytes, big-endian, then the ID's
// characters 5 bits each, ranked in the order the characters sort in. Packed entries sort
// as the entries do, and a sorted set whose members are 64 bytes at most stays a listpack
// in Redis (zset-max-listpack-value): about 180 bytes for a user's first entry and 75 for
// each further one, where entries as text (78 bytes) made a skiplist of about 1,030 bytes
// for the first and 190 for each further one (docs/performance.md, "Footprint").
//
// Indexes of entries as text (legacyUserIndexKey) are still read, beside the packed one,
// until they expire.

// userIndexKey names the index of one user's elicitations, packed.
func userIndexKey(userKey string) string { return state.UserTag(userKey) + "fl" }

// legacyUserIndexKey names the index of one user's elicitations as text, written before
// the packed one. It is read, and no longer written.
func legacyUserIndexKey(userKey string) string { return state.UserTag(userKey) + "flows" }

// userIndexKeys are the keys a listing of one user's elicitations reads.
func userIndexKeys(userKey string) []string {
	return []string{userIndexKey(userKey), legacyUserIndexKey(userKey)}
}

// packed reports whether the members of index key are packed entries.
func packed(key string) bool { return strings.HasSuffix(key, "}:fl") }

// idAlphabetSorted is the alphabet of IDs (base32) in the order its characters sort in.
const idAlphabetSorted = "234567ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// timeBytes is the size of an entry's creation time, packed.
const timeBytes = 6

// packEntry returns the member of a user's packed index for entry, which has the shape of
// indexEntryPattern.
func packEntry(entry string) string {
	ms, _ := strconv.ParseUint(entry[:13], 10, 64)
	id := entry[14:]
	out := make([]byte, timeBytes, timeBytes+(len(id)*5+7)/8)
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], ms)
	copy(out, t[8-timeBytes:])
	var acc uint32
	bits := 0
	for i := range len(id) {
		acc = acc<<5 | uint32(strings.IndexByte(idAlphabetSorted, id[i]))
		bits += 5
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits > 0 {
		out = append(out, byte(acc<<(8-bits)))
	}
	return string(out)
}

// idLengths maps the size of a packed ID to its length in characters: IDs (64) and IDs of
// the legacy form (26).
var idLengths = map[int]int{40: 64, 17: 26}

// unpackEntry returns the entry that member m of a user's packed index stands for, and
// false if m is no packed entry.
func unpackEntry(m string) (string, bool) {
	n, ok := idLengths[len(m)-timeBytes]
	if !ok {
		return "", false
	}
	var t [8]byte
	copy(t[8-timeBytes:], m[:timeBytes])
	ms := fmt.Sprintf("%013d", binary.BigEndian.Uint64(t[:]))
	if len(ms) != 13 {
		return "", false // a time after 2286 is none an entry holds
	}
	var b strings.Builder
	b.Grow(14 + n)
	b.WriteString(ms)
	b.WriteByte(':')
	var acc uint32
	bits := 0
	for i := timeBytes; i < len(m) && b.Len() < 14+n; i++ {
		acc = acc<<8 | uint32(m[i])
		bits += 8
		for bits >= 5 && b.Len() < 14+n {
			bits -= 5
			b.WriteByte(idAlphabetSorted[acc>>bits&31])
		}
	}
	entry := b.String()
	return entry, indexEntryPattern.MatchString(entry) && packEntry(entry) == m
}

// indexMember returns the member of entry in index key.
func indexMember(key, entry string) string {
	if packed(key) {
		return packEntry(entry)
	}
	return entry
}

// memberEntry returns the entry that member m of index key stands for, and false if m is
// no entry.
func memberEntry(key, m string) (string, bool) {
	if packed(key) {
		return unpackEntry(m)
	}
	return m, indexEntryPattern.MatchString(m)
}
