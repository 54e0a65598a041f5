package flow

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MinPrefix is the shortest beginning of an ID that Prefixed looks up: shorter ones would
// match too many.
const MinPrefix = 8

// prefixPattern is the beginning of an ID: base32, from MinPrefix characters to one fewer
// than a whole ID.
var prefixPattern = regexp.MustCompile(`^[A-Z2-7]{8,63}$`)

// IsPrefix reports whether s can be the beginning of an ID that Prefixed looks up (after
// upper-casing it): base32, at least MinPrefix characters, shorter than a whole ID.
func IsPrefix(s string) bool { return prefixPattern.MatchString(strings.ToUpper(s)) }

// Prefixed returns, sorted, the IDs of the elicitations in the listing indexes whose ID
// begins with prefix (in either case), at most limit of them: the elicitations an operator
// means by the first characters of an ID. It scans every bucket of the index (ZSCAN with
// MATCH, in Redis), which is the cost of not keeping an index by ID; an operator's command
// does it once.
func (x *Index) Prefixed(ctx context.Context, prefix string, limit int) ([]string, error) {
	prefix = strings.ToUpper(prefix)
	if !prefixPattern.MatchString(prefix) {
		return nil, fmt.Errorf("%q is not the beginning of an elicitation ID (%d or more characters of A-Z and 2-7)", prefix, MinPrefix)
	}
	// A member is createdAt:ID; the prefix holds no glob character.
	match := "*:" + prefix + "*"
	var ids []string
	for b := range IndexBuckets {
		var cursor uint64
		for {
			members, next, err := x.s.rdb.ZScan(ctx, flowsKey(b), cursor, match, 1000).Result()
			if err != nil {
				return nil, fmt.Errorf("look up the ID prefix: %w", err)
			}
			for i := 0; i < len(members); i += 2 { // member, score
				if _, id, ok := strings.Cut(members[i], ":"); ok && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
			if cursor = next; cursor == 0 || len(ids) > limit {
				break
			}
		}
		if len(ids) > limit {
			break
		}
	}
	slices.Sort(ids)
	return ids[:min(len(ids), limit)], nil
}
