package state

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Once runs fn once for the whole deployment, as the first replica to start claims it: it
// holds the key marker ("running") for lease while fn runs and leaves it "done" after.
// When fn fails the marker is deleted, so that the next start tries again. It reports
// whether this call ran fn.
func Once(ctx context.Context, rdb redis.UniversalClient, marker string, lease time.Duration, fn func(context.Context) error) (bool, error) {
	won, err := rdb.SetNX(ctx, marker, "running", lease).Result()
	if err != nil || !won {
		return false, err
	}
	if err := fn(ctx); err != nil {
		rdb.Del(context.WithoutCancel(ctx), marker)
		return false, err
	}
	return true, rdb.Set(ctx, marker, "done", 0).Err()
}

// ScanKeys calls fn with every key that matches pattern (SCAN; on a Cluster, on every
// primary at once), one call at a time, until fn returns an error.
func ScanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string, fn func(key string) error) error {
	var mu sync.Mutex // the primaries of a Cluster are scanned at once
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			err := fn(iter.Val())
			mu.Unlock()
			if err != nil {
				return err
			}
		}
		return iter.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, scan)
	case *redis.Client:
		return scan(ctx, c)
	}
	return fmt.Errorf("cannot scan the keys of a %T", rdb)
}
