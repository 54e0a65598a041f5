package once

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

func TestTheFirstAnswerIsKeptAndGivenAgain(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		keys, ctx := New(b.Client), t.Context()
		calls := 0
		first := func(context.Context) (Answer, error) {
			calls++
			return Answer{ElicitationID: "e1", Created: true}, nil
		}
		a, replay, err := keys.Do(ctx, "weather", "k", "req-a", first)
		if err != nil || replay || a != (Answer{ElicitationID: "e1", Created: true}) {
			t.Fatalf("first: %+v, %v, %v", a, replay, err)
		}
		a, replay, err = keys.Do(ctx, "weather", "k", "req-a", first)
		if err != nil || !replay || a != (Answer{ElicitationID: "e1", Created: true}) || calls != 1 {
			t.Fatalf("sent again: %+v, replay %v, %v; first called %d times", a, replay, err, calls)
		}
		if _, _, err := keys.Do(ctx, "weather", "k", "req-b", first); !errors.Is(err, ErrReused) {
			t.Fatalf("the key with another request: %v, want ErrReused", err)
		}
		if _, replay, err := keys.Do(ctx, "calendar", "k", "req-a", first); err != nil || replay || calls != 2 {
			t.Fatalf("another scope's key: replay %v, %v", replay, err)
		}
		ttl := b.Client.TTL(ctx, redisKey("weather", "k")).Val()
		if ttl <= Keep-time.Minute || ttl > Keep {
			t.Errorf("an answered key lives %v, want %v", ttl, Keep)
		}
	})
}

func TestAnAnswerThatNamesNothingFreesTheKey(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		keys, ctx := New(b.Client), t.Context()
		failed := errors.New("the store failed")
		for _, first := range []func(context.Context) (Answer, error){
			func(context.Context) (Answer, error) { return Answer{}, nil },    // stored: nothing to repeat
			func(context.Context) (Answer, error) { return Answer{}, failed }, // nothing answered
		} {
			_, replay, err := keys.Do(ctx, "weather", "k", "req-a", first)
			if replay || (err != nil && !errors.Is(err, failed)) {
				t.Fatalf("replay %v, %v", replay, err)
			}
			if n := b.Client.Exists(ctx, redisKey("weather", "k")).Val(); n != 0 {
				t.Fatal("the key is still held")
			}
		}
	})
}

func TestARequestSentAgainWhileTheFirstIsAnsweredIsBusy(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		keys, ctx := New(b.Client), t.Context()
		_, _, err := keys.Do(ctx, "weather", "k", "req-a", func(ctx context.Context) (Answer, error) {
			_, _, err := keys.Do(ctx, "weather", "k", "req-a", func(context.Context) (Answer, error) {
				t.Error("the second request ran")
				return Answer{}, nil
			})
			if !errors.Is(err, ErrBusy) {
				t.Errorf("sent again meanwhile: %v, want ErrBusy", err)
			}
			return Answer{ElicitationID: "e1"}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestTheAnswerIsKeptWhenTheRequestGaveUp(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		keys := New(b.Client)
		ctx, cancel := context.WithCancel(t.Context())
		_, _, err := keys.Do(ctx, "weather", "k", "req-a", func(context.Context) (Answer, error) {
			cancel() // the caller stopped waiting while the first request was answered
			return Answer{ElicitationID: "e1"}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		a, replay, err := keys.Do(t.Context(), "weather", "k", "req-a", nil)
		if err != nil || !replay || a.ElicitationID != "e1" {
			t.Fatalf("sent again: %+v, replay %v, %v", a, replay, err)
		}
	})
}
