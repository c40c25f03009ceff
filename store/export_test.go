package store

// What the external specs need to see of the store's insides.

// TripReadStatements is tripReadStatements.
const TripReadStatements = tripReadStatements

// TripReadsWaiting is how many reads of single trips wait for a statement.
func (s *Store) TripReadsWaiting() int {
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	return len(s.reads.waiting)
}
