package terminal

// SkipOwnerCleanup breaks the service on purpose until the returned
// function restores it: owners' cleanups leave their sessions behind.
func SkipOwnerCleanup() (restore func()) {
	testHookSkipOwnerCleanup.Store(true)
	return func() { testHookSkipOwnerCleanup.Store(false) }
}

// RepublishID replaces the session published under id with another record
// of the same id, as a service that minted an id twice would.
func RepublishID(s *Service, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.sessions[id]; r != nil {
		clone := *r
		s.sessions[id] = &clone
	}
}
