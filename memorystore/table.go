package memorystore

import (
	"strings"
	"sync"
	"sync/atomic"
)

// entry is one key: its policies' states, and a lock of its own. A decision
// for a key the store holds takes only this lock, never its shard's, so two
// cores deciding for different keys share no cache line (with a lock per
// shard, most decisions pulled the shard's line from the other core).
//
// Once the keys outgrow the CPU caches, a decision's cost is mostly its
// cache misses, so an entry keeps together what a decision reads: the key
// (inline when short), the lock and the first policy's state, in 128 bytes
// (two adjacent cache lines, which the processor fetches as a pair).
type entry struct {
	mu    sync.Mutex
	dead  bool  // removed from its table; under mu
	klen  uint8 // the key's length when it is in short; longKey: in long
	hash  uint64
	long  string
	short [24]byte
	first node // the policies' states, a list; under mu
}

const longKey = 255

func newEntry(hash uint64, key string, first node) *entry {
	e := &entry{hash: hash, first: first}
	if len(key) <= len(e.short) {
		e.klen = uint8(copy(e.short[:], key))
	} else {
		// A copy, so the store never pins a caller's larger buffer.
		e.long, e.klen = strings.Clone(key), longKey
	}
	return e
}

// is reports whether e is key's entry; its fields are fixed, so no lock is
// needed.
func (e *entry) is(hash uint64, key string) bool {
	if e.hash != hash {
		return false
	}
	if e.klen == longKey {
		return e.long == key
	}
	return int(e.klen) == len(key) && string(e.short[:e.klen]) == key
}

// table is one shard's keys: an open-addressing hash table with linear
// probing, read without a lock and changed under the shard's lock.
//
// A reader racing a change may miss a key or meet an entry twice, never
// see a wrong one: an entry's identity is fixed, and an entry is marked
// dead, under its lock, before it leaves the table. A reader that finds its
// key's entry and, holding its lock, sees it alive therefore holds the key's
// one live state; one that finds nothing, or a dead entry, looks again
// under the shard's lock (Store.takeLocked).
//
// Deletion shifts the following entries of the probe run back instead of
// leaving tombstones, so lookups do not slow down as keys come and go.
type table struct {
	slots []atomic.Pointer[entry] // length a power of two
}

const minSlots = 8

// find returns key's entry in t and its index, or nil and -1.
func (t *table) find(hash uint64, key string) (*entry, int) {
	if t == nil {
		return nil, -1
	}
	mask := len(t.slots) - 1
	for i := int(hash) & mask; ; i = (i + 1) & mask {
		e := t.slots[i].Load()
		if e == nil {
			return nil, -1
		}
		if e.is(hash, key) {
			return e, i
		}
	}
}

// size is the number of slots; 0 for a nil table.
func (t *table) size() int {
	if t == nil {
		return 0
	}
	return len(t.slots)
}

// place puts e in the first free slot of its probe run.
func (t *table) place(e *entry) {
	mask := len(t.slots) - 1
	i := int(e.hash) & mask
	for t.slots[i].Load() != nil {
		i = (i + 1) & mask
	}
	t.slots[i].Store(e)
}

// remove empties slot i, moving back each following entry of the probe run
// that would otherwise become unreachable. Only slots from i onwards, in
// probe order (which wraps at the end), change.
func (t *table) remove(i int) {
	mask := len(t.slots) - 1
	hole := i
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		e := t.slots[j].Load()
		if e == nil {
			break
		}
		// The entry at j may fill the hole unless its home lies cyclically
		// in (hole, j]: then it sits where its own probe run expects it.
		if home := int(e.hash) & mask; (j-home)&mask >= (j-hole)&mask {
			t.slots[hole].Store(e)
			hole = j
		}
	}
	t.slots[hole].Store(nil)
}

// rehash returns a table of size slots (a power of two) holding t's
// entries; the shard publishes it in one atomic store, so readers see
// either table whole.
func (t *table) rehash(size int) *table {
	nt := &table{slots: make([]atomic.Pointer[entry], size)}
	if t != nil {
		for i := range t.slots {
			if e := t.slots[i].Load(); e != nil {
				nt.place(e)
			}
		}
	}
	return nt
}
