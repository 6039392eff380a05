package detect

// TrackedKeys returns how many keys d counts, for tests of its bound.
func TrackedKeys(d *Detector) int {
	n := 0
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		n += len(s.keys)
		s.mu.Unlock()
	}
	return n
}
