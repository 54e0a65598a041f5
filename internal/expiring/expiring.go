// Package expiring keeps values in memory for a while, and never more than a set number of
// them, for the in-memory caches and counters that strangers can fill (introspection
// answers, failed token checks per client address).
//
// The one idea to hold: memory is bounded before anything else. A full Map makes room by
// dropping the entry that was set longest ago, whether or not it has expired.
package expiring

import (
	"container/list"
	"time"
)

// Map holds at most a fixed number of values, each until its expiry. Like a Go map, it is
// not safe for concurrent use: its user holds a lock around every call.
type Map[K comparable, V any] struct {
	max   int
	items map[K]*list.Element
	// order holds the entries, the one set longest ago at the front.
	order *list.List
}

type entry[K comparable, V any] struct {
	key     K
	value   V
	expires time.Time
}

// New returns a Map that holds at most size values (at least one).
func New[K comparable, V any](size int) *Map[K, V] {
	return &Map[K, V]{max: max(1, size), items: map[K]*list.Element{}, order: list.New()}
}

// Get returns the value of key, unless there is none or it expired at now or before.
func (m *Map[K, V]) Get(key K, now time.Time) (V, bool) {
	el, ok := m.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*entry[K, V])
	if !now.Before(e.expires) {
		m.remove(el)
		var zero V
		return zero, false
	}
	return e.value, true
}

// Set keeps value for key until expires, in place of any value key had. It first drops the
// entries at the front that expired at now or before and, when the Map is still full, the
// entry set longest ago.
func (m *Map[K, V]) Set(key K, value V, expires, now time.Time) {
	if el, ok := m.items[key]; ok {
		m.remove(el)
	}
	m.Prune(now)
	if m.order.Len() >= m.max {
		m.remove(m.order.Front())
	}
	m.items[key] = m.order.PushBack(&entry[K, V]{key: key, value: value, expires: expires})
}

// Prune drops the entries at the front that expired at now or before, as Set does, and
// returns how many: a Map that nobody sets any more would otherwise hold its expired
// values (and their memory) until the next Set.
func (m *Map[K, V]) Prune(now time.Time) int {
	n := 0
	for el := m.order.Front(); el != nil && !now.Before(el.Value.(*entry[K, V]).expires); el = m.order.Front() {
		m.remove(el)
		n++
	}
	return n
}

// Delete forgets key.
func (m *Map[K, V]) Delete(key K) {
	if el, ok := m.items[key]; ok {
		m.remove(el)
	}
}

// Len returns how many values the Map holds, expired ones that were not dropped yet included.
func (m *Map[K, V]) Len() int { return m.order.Len() }

func (m *Map[K, V]) remove(el *list.Element) {
	delete(m.items, el.Value.(*entry[K, V]).key)
	m.order.Remove(el)
}
