package top

import (
	"cmp"
	"slices"
	"sync"
)

// TopK finds the heaviest keys of a stream in bounded memory with the
// Space-Saving algorithm (Metwally, Agrawal, El Abbadi, 2005): it keeps
// Capacity counters; a key not yet counted takes over the smallest counter,
// inheriting its count as possible overestimation.
//
// Guarantees, for N the total weight added: every reported Count is at
// least the key's true weight and at most Count−Error above it
// (Count−Error ≤ true ≤ Count), Error ≤ N/Capacity, and every key whose true
// weight exceeds N/Capacity is among the counters. A TopK is safe for
// concurrent use.
type TopK struct {
	mu    sync.Mutex
	k     int
	total uint64
	heap  []*counter // min-heap by count
	index map[string]*counter
}

type counter struct {
	key   string
	count uint64
	err   uint64
	pos   int
}

// Entry is one key of a TopK report.
type Entry struct {
	// Key is the counted key, as added.
	Key string `json:"key"`
	// Count is an upper bound of the key's weight.
	Count uint64 `json:"count"`
	// Error bounds the overestimation: the true weight is at least
	// Count−Error.
	Error uint64 `json:"error"`
}

// NewTopK returns a TopK of capacity counters (at least 1).
func NewTopK(capacity int) *TopK {
	capacity = max(1, capacity)
	return &TopK{k: capacity, index: make(map[string]*counter, capacity)}
}

// Add counts weight more for key.
func (t *TopK) Add(key string, weight uint64) {
	if weight == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += weight
	if c, ok := t.index[key]; ok {
		c.count += weight
		t.down(c.pos)
		return
	}
	if len(t.heap) < t.k {
		c := &counter{key: key, count: weight, pos: len(t.heap)}
		t.heap = append(t.heap, c)
		t.index[key] = c
		t.up(c.pos)
		return
	}
	// Replace the minimum: the newcomer may have been seen up to min times
	// before, uncounted, so min becomes its error.
	c := t.heap[0]
	delete(t.index, c.key)
	c.key, c.err = key, c.count
	c.count += weight
	t.index[key] = c
	t.down(0)
}

// Total returns the weight added since creation or the last Reset.
func (t *TopK) Total() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// Capacity returns the number of counters.
func (t *TopK) Capacity() int { return t.k }

// Top returns up to n entries, heaviest first (ties by key); n ≤ 0 means all
// counters.
func (t *TopK) Top(n int) []Entry {
	out, _ := t.snapshot()
	sortEntries(out)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Reset forgets everything counted.
func (t *TopK) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total = 0
	t.heap = t.heap[:0]
	clear(t.index)
}

// snapshot returns all counters, unsorted, and the smallest count when
// every counter is taken (0 otherwise): a key absent from a full summary
// may have been seen up to that many times.
func (t *TopK) snapshot() (entries []Entry, floor uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	entries = make([]Entry, len(t.heap))
	for i, c := range t.heap {
		entries[i] = Entry{Key: c.key, Count: c.count, Error: c.err}
	}
	if len(t.heap) == t.k {
		floor = t.heap[0].count
	}
	return entries, floor
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}

// mergeSummaries combines two Space-Saving summaries into one report that
// keeps the guarantees for the sum of both streams: a key missing from a
// full summary may have had up to that summary's floor there, which is
// added to both its count and its error.
func mergeSummaries(a []Entry, aFloor uint64, b []Entry, bFloor uint64) []Entry {
	m := make(map[string]Entry, len(a)+len(b))
	for _, e := range a {
		m[e.Key] = e
	}
	seenB := make(map[string]bool, len(b))
	for _, e := range b {
		seenB[e.Key] = true
		if x, ok := m[e.Key]; ok {
			m[e.Key] = Entry{Key: e.Key, Count: x.Count + e.Count, Error: x.Error + e.Error}
		} else {
			m[e.Key] = Entry{Key: e.Key, Count: e.Count + aFloor, Error: e.Error + aFloor}
		}
	}
	for _, e := range a {
		if !seenB[e.Key] {
			m[e.Key] = Entry{Key: e.Key, Count: e.Count + bFloor, Error: e.Error + bFloor}
		}
	}
	out := make([]Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	sortEntries(out)
	return out
}

func (t *TopK) less(i, j int) bool { return t.heap[i].count < t.heap[j].count }

func (t *TopK) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.heap[i].pos, t.heap[j].pos = i, j
}

func (t *TopK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *TopK) down(i int) {
	n := len(t.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		s := l
		if r := l + 1; r < n && t.less(r, l) {
			s = r
		}
		if !t.less(s, i) {
			return
		}
		t.swap(i, s)
		i = s
	}
}
