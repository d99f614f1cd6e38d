package meta

// Task is the task whose rows the store writes (empty for a store made without one).
func (s *Store) Task() string { return s.task }

// Source is the source whose rows the store writes.
func (s *Store) Source() string { return s.source }
